//! The conformance suites: every directory under `testdata/taxonomy/`
//! (taxonomy-v1, spec 6) is one named test `fixture::…`, and every one
//! under `testdata/taxonomy-v2/` (docs/taxonomy-v2.md 8) one named test
//! `v2::…`, and under `testdata/taxonomy-v3/` (docs/taxonomy-v3.md 8)
//! `v3::…`. A failure prints the fixture's inputs, what it wants, what we
//! got, and the evidence.
//!
//! Fixtures are normative and written by hand from the spec; nothing here
//! ever rewrites a `want.json`.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use libtest_mimic::{Arguments, Failed, Trial};
use plumbline_taxonomy::json::parse_tool;
use plumbline_taxonomy::{Classifier, Inventory, RuleId, Taxonomy};
use serde_json::Value as Json;

/// Each rule needs at least this many fixtures (spec 6; v2 8).
const MIN_PER_RULE: usize = 5;

/// One suite: the test-name prefix, the directory, the taxonomy.
const SUITES: [(&str, &str, Taxonomy); 3] = [
    ("fixture", "testdata/taxonomy", Taxonomy::V1),
    ("v2", "testdata/taxonomy-v2", Taxonomy::V2),
    ("v3", "testdata/taxonomy-v3", Taxonomy::V3),
];

fn main() {
    let args = Arguments::from_args();
    let mut trials: Vec<Trial> = Vec::new();
    for (prefix, dir, taxonomy) in SUITES {
        trials.extend(suite(prefix, dir, taxonomy));
    }
    libtest_mimic::run(&args, trials).exit();
}

fn suite(prefix: &'static str, dir: &str, taxonomy: Taxonomy) -> Vec<Trial> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(dir);
    let mut dirs: Vec<PathBuf> = fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("reading {}: {e}", root.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();

    let classifier = Classifier::for_taxonomy(taxonomy);
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
            Trial::test(format!("{prefix}::{name}"), move || {
                run_fixture(&classifier, &dir)
            })
        })
        .collect();
    // The v1 suite keeps its meta-test names.
    let meta = match prefix {
        "fixture" => "meta",
        "v2" => "meta_v2",
        _ => "meta_v3",
    };
    let all = dirs.clone();
    trials.push(Trial::test(
        format!("{meta}::every_rule_has_enough_fixtures"),
        move || count_per_rule(taxonomy, &all),
    ));
    let all = dirs;
    trials.push(Trial::test(
        format!("{meta}::every_fixture_directory_is_well_formed"),
        move || {
            let problems: Vec<String> = all
                .iter()
                .filter_map(|d| check_shape(taxonomy, d).err())
                .collect();
            if problems.is_empty() {
                Ok(())
            } else {
                Err(problems.join("\n").into())
            }
        },
    ));
    trials
}

/// `RNN_NN_slug`: the rule, a two-digit sequence number, a lowercase slug.
fn parse_name(taxonomy: Taxonomy, name: &str) -> Result<RuleId, String> {
    let bad = || format!("{name}: not named RNN_NN_slug with a rule of {taxonomy}");
    let mut parts = name.splitn(3, '_');
    let (Some(rule), Some(seq), Some(slug)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(bad());
    };
    let rule: RuleId = rule
        .parse()
        .ok()
        .filter(|r: &RuleId| r.as_str() == rule && taxonomy.has(*r))
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

/// The directory holds exactly `old.json` (a v3 fixture without it grades
/// an added tool), `new.json` and `want.json` (and, for v2 and v3, optionally
/// `inventory.json`); both tools are JSON
/// objects; `want.json` has a valid severity, sorted unique rules of the
/// suite's taxonomy, a severity that is the max of its rules, and no keys
/// besides `severity`, `rules` and the optional hand-written `why`.
fn check_shape(taxonomy: Taxonomy, dir: &Path) -> Result<(), String> {
    let name = dir
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    parse_name(taxonomy, &name)?;
    let mut files: Vec<String> = fs::read_dir(dir)
        .map_err(|e| format!("{name}: {e}"))?
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect();
    files.sort();
    // taxonomy-v3 8: a fixture without old.json grades new.json as an
    // added tool.
    let added = is_added(taxonomy, dir);
    let mut want_files = vec!["new.json", "want.json"];
    if !added {
        want_files.push("old.json");
    }
    if taxonomy >= Taxonomy::V2 && files.iter().any(|f| f == "inventory.json") {
        want_files.push("inventory.json");
    }
    want_files.sort();
    if files != want_files {
        return Err(format!(
            "{name}: holds {files:?}, want exactly {want_files:?}{}",
            if taxonomy >= Taxonomy::V2 {
                " (inventory.json optional)"
            } else {
                ""
            }
        ));
    }
    read_inventory(taxonomy, dir)?;
    let tools: &[&str] = if added {
        &["new.json"]
    } else {
        &["old.json", "new.json"]
    };
    for f in tools {
        let bytes = fs::read(dir.join(f)).map_err(|e| format!("{name}/{f}: {e}"))?;
        parse_tool(&bytes).map_err(|e| format!("{name}/{f}: {e}"))?;
    }
    read_want(taxonomy, dir).map(|_| ())
}

/// A taxonomy-v3 fixture without `old.json` grades an added tool.
fn is_added(taxonomy: Taxonomy, dir: &Path) -> bool {
    taxonomy >= Taxonomy::V3 && !dir.join("old.json").exists()
}

/// `inventory.json`: `{"siblings": [...], "foreign": [...]}` (names), and
/// for taxonomy-v3 also `"sibling_tools"` and `"foreign_tools"` (tool
/// objects, docs/taxonomy-v3.md 1.1); empty when absent.
fn read_inventory(taxonomy: Taxonomy, dir: &Path) -> Result<Inventory, String> {
    let path = dir.join("inventory.json");
    if !path.exists() {
        return Ok(Inventory::empty());
    }
    let text = fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let json: BTreeMap<String, Json> =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let keys: &[&str] = if taxonomy >= Taxonomy::V3 {
        &["siblings", "foreign", "sibling_tools", "foreign_tools"]
    } else {
        &["siblings", "foreign"]
    };
    if let Some(k) = json.keys().find(|k| !keys.contains(&k.as_str())) {
        return Err(format!("{}: unexpected key {k:?}", path.display()));
    }
    for k in ["siblings", "foreign"] {
        let names_ok = json.get(k).is_none_or(|v| {
            v.as_array()
                .is_some_and(|a| a.iter().all(|n| n.is_string()))
        });
        if !names_ok {
            return Err(format!(
                "{}: {k:?} is not an array of names",
                path.display()
            ));
        }
    }
    let value = plumbline_taxonomy::json::parse_with_depth(text.as_bytes(), 1_100)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    plumbline_taxonomy::corpus::inventory_for(Some(&value), taxonomy)
        .map_err(|e| format!("{}: {e}", path.display()))
}

struct Want {
    severity: String,
    rules: Vec<String>,
    why: Option<String>,
}

fn read_want(taxonomy: Taxonomy, dir: &Path) -> Result<Want, String> {
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
        .map(|r| {
            r.parse()
                .ok()
                .filter(|p: &RuleId| p.as_str() == r && taxonomy.has(*p))
        })
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
    let taxonomy = classifier.taxonomy();
    check_shape(taxonomy, dir)?;
    let added = is_added(taxonomy, dir);
    let old_text = if added {
        "(none: an added tool)".to_owned()
    } else {
        fs::read_to_string(dir.join("old.json"))?
    };
    let new_text = fs::read_to_string(dir.join("new.json"))?;
    let new = parse_tool(new_text.as_bytes())?;
    let want = read_want(taxonomy, dir)?;
    let inventory = read_inventory(taxonomy, dir)?;
    let got = if added {
        classifier.classify_added(&new, &inventory)
    } else {
        let old = parse_tool(old_text.as_bytes())?;
        classifier.classify_in(&old, &new, &inventory)
    };
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

fn count_per_rule(taxonomy: Taxonomy, dirs: &[PathBuf]) -> Result<(), Failed> {
    let mut counts: BTreeMap<RuleId, usize> = taxonomy.rules().iter().map(|r| (*r, 0)).collect();
    for d in dirs {
        let name = d
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let rule = parse_name(taxonomy, &name)?;
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
