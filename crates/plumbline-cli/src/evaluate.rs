//! `plumbline evaluate`: how a taxonomy grades a labelled corpus. The
//! team argues every rule change with these figures; a user measures
//! Plumbline on their own history with them.

use std::io::{self, Write};
use std::path::Path;

use anyhow::{Context as _, Result};
use plumbline_taxonomy::corpus::{evaluate, parse_labelled, Evaluation, GroupScore, LabelledPair};
use plumbline_taxonomy::sanitize::for_terminal;
use plumbline_taxonomy::Severity;

use crate::cli::{EvaluateArgs, Format};
use crate::exit::Outcome;

pub fn run(args: &EvaluateArgs) -> Result<Outcome> {
    let classifier = crate::classify::load_classifier(
        args.taxonomy.taxonomy.unwrap_or_default(),
        args.imperatives.as_deref(),
    )?;
    let mut pairs: Vec<(LabelledPair, String)> = Vec::new();
    let mut bad = Vec::new();
    for path in &args.files {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let group = group_name(path);
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            match parse_labelled(line) {
                Ok(p) => pairs.push((p, group.clone())),
                Err(e) => bad.push(format!("{}: line {}: {e}", path.display(), i + 1)),
            }
        }
    }
    let evaluation = evaluate(&classifier, pairs.iter().map(|(p, g)| (p, g.as_str())));
    let mut out = io::stdout().lock();
    match args.format {
        Format::Human => human(&mut out, &evaluation, pairs.len())?,
        Format::Json => {
            let mut doc = serde_json::to_value(&evaluation)?;
            doc["unreadable_lines"] = serde_json::json!(bad);
            crate::render::write_json(&mut out, &doc, true)?;
        }
    }
    out.flush()?;
    bad.extend(evaluation.unreadable.iter().cloned());
    for b in &bad {
        eprintln!("plumbline evaluate: {}", for_terminal(b, false));
    }
    Ok(if bad.is_empty() {
        Outcome::Clean
    } else {
        Outcome::InputError
    })
}

/// The file name without its extension.
fn group_name(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

fn share(n: usize, of: usize) -> String {
    if of == 0 {
        return "-".to_owned();
    }
    let percent = n as f64 * 100.0 / of as f64;
    // Two decimals where one would round a small share to nothing.
    if percent > 0.0 && percent < 1.0 {
        format!("{n} of {of} ({percent:.2}%)")
    } else {
        format!("{n} of {of} ({percent:.1}%)")
    }
}

fn row(out: &mut impl Write, g: &GroupScore) -> io::Result<()> {
    let label = match g.label {
        Some(plumbline_taxonomy::corpus::Label::Attack) => "attack",
        Some(plumbline_taxonomy::corpus::Label::Benign) => "benign",
        None => "",
    };
    write!(
        out,
        "{:<18} {:<7} {:>6}",
        for_terminal(&g.group, false),
        label,
        g.pairs
    )?;
    for s in Severity::ALL {
        write!(out, " {:>8}", g.by_severity.get(&s).copied().unwrap_or(0))?;
    }
    writeln!(out, "  {}", share(g.at_least_high, g.pairs))
}

fn human(out: &mut impl Write, e: &Evaluation, total: usize) -> io::Result<()> {
    writeln!(
        out,
        "plumbline evaluate · {} · {total} pairs in {} groups\n",
        e.taxonomy,
        e.groups.len()
    )?;
    write!(out, "{:<18} {:<7} {:>6}", "group", "label", "pairs")?;
    for s in Severity::ALL {
        write!(out, " {:>8}", s.as_str())?;
    }
    writeln!(out, "  ≥ HIGH")?;
    for g in &e.groups {
        row(out, g)?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "attacks graded ≥ HIGH   {}",
        share(e.attacks.at_least_high, e.attacks.pairs)
    )?;
    writeln!(
        out,
        "benign graded ≥ HIGH    {}",
        share(e.benign.at_least_high, e.benign.pairs)
    )?;
    writeln!(
        out,
        "benign graded CRITICAL  {}",
        share(e.benign.critical, e.benign.pairs)
    )?;
    if !e.benign_rules.is_empty() {
        writeln!(
            out,
            "\nbenign pairs per rule, with the most frequent evidence:"
        )?;
        for r in &e.benign_rules {
            writeln!(
                out,
                "  {} {:<8} {:>5} pairs",
                r.rule,
                r.rule.severity().as_str(),
                r.pairs
            )?;
            for (message, count) in r.evidence.iter().take(5) {
                let shown: String = message.chars().take(100).collect();
                writeln!(out, "      {count:>5} × {}", for_terminal(&shown, false))?;
            }
        }
    }
    if !e.families.is_empty() {
        writeln!(out, "\nper attack family (records that name one):")?;
        write!(out, "{:<18} {:<7} {:>6}", "family", "label", "pairs")?;
        for s in Severity::ALL {
            write!(out, " {:>8}", s.as_str())?;
        }
        writeln!(out, "  ≥ HIGH")?;
        let mut families = e.families.clone();
        families.sort_by(|a, b| a.group.cmp(&b.group).then(a.label.cmp(&b.label)));
        for g in &families {
            row(out, g)?;
        }
    }
    if !e.missed_attacks.is_empty() {
        writeln!(out, "\nattacks graded below HIGH:")?;
        for m in &e.missed_attacks {
            let rules: Vec<&str> = m.rules.iter().map(|r| r.as_str()).collect();
            writeln!(
                out,
                "  {:<40} {:<10} {} [{}]",
                for_terminal(&m.id, false),
                for_terminal(&m.group, false),
                m.severity,
                rules.join(", ")
            )?;
        }
    }
    Ok(())
}
