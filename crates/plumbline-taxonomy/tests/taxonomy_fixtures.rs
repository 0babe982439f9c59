//! The conformance suite of spec 6: every directory under
//! `testdata/taxonomy/` is one named test. A failure prints the fixture's
//! inputs, what it wants, what we got, and the evidence.
//!
//! Fixtures are normative and written by hand from the spec; nothing here
//! ever rewrites a `want.json`.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use libtest_mimic::{Arguments, Failed, Trial};
use plumbline_taxonomy::json::parse_tool;
use plumbline_taxonomy::{Classifier, RuleId};
use serde_json::Value as Json;

/// Each rule needs at least this many fixtures (spec 6).
const MIN_PER_RULE: usize = 5;

fn fixture_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/taxonomy")
}

fn main() {
    let args = Arguments::from_args();
    let root = fixture_root();
    let mut dirs: Vec<PathBuf> = fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("reading {}: {e}", root.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();

    let classifier = Classifier::default();
    let mut trials: Vec<Trial> = dirs
        .iter()
        .map(|dir| {
            let name = dir
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            let dir = dir.clone();
            let classifier = classifier.clone();
            Trial::test(format!("fixture::{name}"), move || {
                run_fixture(&classifier, &dir)
            })
        })
        .collect();
    let all = dirs.clone();
    trials.push(Trial::test(
        "meta::every_rule_has_enough_fixtures",
        move || count_per_rule(&all),
    ));
    let all = dirs;
    trials.push(Trial::test(
        "meta::every_fixture_directory_is_well_formed",
        move || {
            let problems: Vec<String> = all.iter().filter_map(|d| check_shape(d).err()).collect();
            if problems.is_empty() {
                Ok(())
            } else {
                Err(problems.join("\n").into())
            }
        },
    ));
    libtest_mimic::run(&args, trials).exit();
}

/// `R0N_NN_slug`: the rule, a two-digit sequence number, a lowercase slug.
fn parse_name(name: &str) -> Result<RuleId, String> {
    let bad = || format!("{name}: not named R0N_NN_slug");
    let mut parts = name.splitn(3, '_');
    let (Some(rule), Some(seq), Some(slug)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(bad());
    };
    let rule: RuleId = rule
        .parse()
        .ok()
        .filter(|r: &RuleId| r.as_str() == rule)
        .ok_or_else(bad)?;
    let slug_ok = !slug.is_empty()
        && slug
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if seq.len() != 2 || !seq.bytes().all(|b| b.is_ascii_digit()) || !slug_ok {
        return Err(bad());
    }
    Ok(rule)
}

/// The directory holds exactly `old.json`, `new.json` and `want.json`;
/// both tools are JSON objects; `want.json` has a valid severity, sorted
/// unique rules, a severity that is the max of its rules, and no keys
/// besides `severity`, `rules` and the optional hand-written `why`.
fn check_shape(dir: &Path) -> Result<(), String> {
    let name = dir
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    parse_name(&name)?;
    let mut files: Vec<String> = fs::read_dir(dir)
        .map_err(|e| format!("{name}: {e}"))?
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect();
    files.sort();
    if files != ["new.json", "old.json", "want.json"] {
        return Err(format!(
            "{name}: holds {files:?}, want exactly new.json, old.json, want.json"
        ));
    }
    for f in ["old.json", "new.json"] {
        let bytes = fs::read(dir.join(f)).map_err(|e| format!("{name}/{f}: {e}"))?;
        parse_tool(&bytes).map_err(|e| format!("{name}/{f}: {e}"))?;
    }
    read_want(dir).map(|_| ())
}

struct Want {
    severity: String,
    rules: Vec<String>,
    why: Option<String>,
}

fn read_want(dir: &Path) -> Result<Want, String> {
    let name = dir
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    let text =
        fs::read_to_string(dir.join("want.json")).map_err(|e| format!("{name}/want.json: {e}"))?;
    let json: BTreeMap<String, Json> =
        serde_json::from_str(&text).map_err(|e| format!("{name}/want.json: {e}"))?;
    for key in json.keys() {
        if !["severity", "rules", "why"].contains(&key.as_str()) {
            return Err(format!("{name}/want.json: unexpected key {key:?}"));
        }
    }
    let severity = json
        .get("severity")
        .and_then(Json::as_str)
        .ok_or(format!("{name}/want.json: no string severity"))?
        .to_owned();
    let rules: Vec<String> = json
        .get("rules")
        .and_then(Json::as_array)
        .ok_or(format!("{name}/want.json: no rules array"))?
        .iter()
        .map(|r| r.as_str().map(str::to_owned))
        .collect::<Option<_>>()
        .ok_or(format!("{name}/want.json: a rule is not a string"))?;
    let parsed: Vec<RuleId> = rules
        .iter()
        .map(|r| r.parse().ok().filter(|p: &RuleId| p.as_str() == r))
        .collect::<Option<_>>()
        .ok_or(format!("{name}/want.json: unknown rule in {rules:?}"))?;
    if parsed.windows(2).any(|w| w[0] >= w[1]) {
        return Err(format!(
            "{name}/want.json: rules not sorted and unique: {rules:?}"
        ));
    }
    let max = parsed
        .iter()
        .map(|r| r.severity())
        .max()
        .unwrap_or_default();
    if max.as_str() != severity {
        return Err(format!(
            "{name}/want.json: severity {severity} is not the max of {rules:?} ({max})"
        ));
    }
    let why = json.get("why").and_then(Json::as_str).map(str::to_owned);
    Ok(Want {
        severity,
        rules,
        why,
    })
}

fn run_fixture(classifier: &Classifier, dir: &Path) -> Result<(), Failed> {
    check_shape(dir)?;
    let old_text = fs::read_to_string(dir.join("old.json"))?;
    let new_text = fs::read_to_string(dir.join("new.json"))?;
    let old = parse_tool(old_text.as_bytes())?;
    let new = parse_tool(new_text.as_bytes())?;
    let want = read_want(dir)?;
    let got = classifier.classify(&old, &new);
    let got_rules: Vec<&str> = got.rules.iter().map(|r| r.as_str()).collect();
    if got.severity.as_str() == want.severity && got_rules == want.rules {
        return Ok(());
    }
    let evidence = serde_json::to_string_pretty(&got.evidence).unwrap_or_default();
    Err(format!(
        "fixture {}\n--- old.json\n{old_text}\n--- new.json\n{new_text}\n--- want\n{} {:?}\n{}\n--- got\n{} {:?}\n--- evidence\n{evidence}\n",
        dir.display(),
        want.severity,
        want.rules,
        want.why.unwrap_or_default(),
        got.severity,
        got_rules,
    )
    .into())
}

fn count_per_rule(dirs: &[PathBuf]) -> Result<(), Failed> {
    let mut counts: BTreeMap<RuleId, usize> = plumbline_taxonomy::Taxonomy::V1
        .rules()
        .iter()
        .map(|r| (*r, 0))
        .collect();
    for d in dirs {
        let name = d
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let rule = parse_name(&name)?;
        *counts.entry(rule).or_default() += 1;
    }
    let short: Vec<String> = counts
        .iter()
        .filter(|(_, n)| **n < MIN_PER_RULE)
        .map(|(r, n)| format!("{r} has {n}"))
        .collect();
    if short.is_empty() {
        Ok(())
    } else {
        Err(format!("fewer than {MIN_PER_RULE} fixtures: {}", short.join(", ")).into())
    }
}
