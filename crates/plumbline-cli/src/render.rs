//! Human-readable output. Every string that came from a server (pointers
//! are built from its keys, evidence quotes its text) goes through
//! `sanitize::for_terminal` before it is printed.

use std::io::{self, Write};
use std::path::Path;

use anyhow::Result;
use plumbline_taxonomy::sanitize::for_terminal;
use plumbline_taxonomy::{Classification, RuleId};
use serde::Serialize;

use crate::cli::{ExplainArgs, Format, RulesArgs};

pub fn classification(
    out: &mut impl Write,
    old: &Path,
    new: &Path,
    c: &Classification,
) -> Result<()> {
    let safe = |s: &str| for_terminal(s, false);
    writeln!(
        out,
        "{} → {}",
        safe(&old.display().to_string()),
        safe(&new.display().to_string())
    )?;
    if c.rules.is_empty() {
        writeln!(out, "severity: NONE (no rule fired)")?;
        return Ok(());
    }
    let codes: Vec<&str> = c.rules.iter().map(|r| r.as_str()).collect();
    writeln!(out, "severity: {} ({})", c.severity, codes.join(", "))?;
    for rule in &c.rules {
        writeln!(out)?;
        writeln!(out, "{rule} {} {}", rule.severity(), rule.title())?;
        for e in c.evidence.iter().filter(|e| e.rule == *rule) {
            let pointer = if e.pointer.is_empty() {
                "(root)"
            } else {
                &e.pointer
            };
            writeln!(out, "  {}: {}", safe(pointer), safe(&e.message()))?;
        }
    }
    Ok(())
}

#[derive(Serialize)]
struct RuleRow {
    id: RuleId,
    severity: plumbline_taxonomy::Severity,
    title: &'static str,
}

pub fn rules(args: &RulesArgs) -> Result<()> {
    let mut out = io::stdout().lock();
    let taxonomy = args.taxonomy.taxonomy.unwrap_or_default();
    match args.format {
        Format::Human => {
            for &rule in taxonomy.rules() {
                writeln!(
                    out,
                    "{rule}  {:<8}  {}",
                    rule.severity().as_str(),
                    rule.title()
                )?;
            }
        }
        Format::Json => {
            let rows: Vec<RuleRow> = taxonomy
                .rules()
                .iter()
                .map(|&id| RuleRow {
                    id,
                    severity: id.severity(),
                    title: id.title(),
                })
                .collect();
            write_json(&mut out, &rows, false)?;
        }
    }
    out.flush()?;
    Ok(())
}

pub fn explain(args: &ExplainArgs) -> Result<()> {
    let mut out = io::stdout().lock();
    if args.format == Format::Json {
        let r = args.rule;
        return write_json(
            &mut out,
            &serde_json::json!({
                "rule": r,
                "severity": r.severity(),
                "title": r.title(),
                "documentation": r.documentation(),
            }),
            false,
        );
    }
    out.write_all(args.rule.documentation().as_bytes())?;
    out.flush()?;
    Ok(())
}

/// The drift of one server, for people: each tool that changed, worst
/// first, with its rules and evidence; unchanged tools as a count.
pub fn drift(out: &mut impl Write, d: &plumbline_drift::Drift) -> Result<()> {
    use plumbline_drift::Change;
    let safe = |s: &str| for_terminal(s, false);
    let mut unchanged = 0;
    for t in &d.tools {
        let label = match &t.change {
            Change::Added => "ADDED".to_owned(),
            Change::Removed => "REMOVED".to_owned(),
            Change::Changed => "CHANGED".to_owned(),
            Change::Unchanged => {
                unchanged += 1;
                continue;
            }
            Change::Renamed { .. } => "RENAMED".to_owned(),
            Change::Unreadable { .. } => "UNREADABLE".to_owned(),
        };
        let c = &t.classification;
        let rules: Vec<&str> = c.rules.iter().map(|r| r.as_str()).collect();
        let graded = if matches!(t.change, Change::Removed) {
            String::new()
        } else if let Change::Unreadable { reason } = &t.change {
            format!(
                "  {}: could not be read, so not graded ({})",
                t.severity,
                safe(reason)
            )
        } else if t.is_new_for_review() {
            format!("  {} (new tool: review)", t.severity)
        } else if rules.is_empty() {
            format!("  {}", t.severity)
        } else {
            format!("  {} ({})", t.severity, rules.join(", "))
        };
        let from = match &t.change {
            Change::Renamed { from } => format!(" (from {})", safe(from)),
            _ => String::new(),
        };
        writeln!(out, "  {label:<8} {}{from}{graded}", safe(&t.name))?;
        // No rule had anything to say: say what changed all the same.
        for f in &t.fields {
            let side = |v: &Option<String>| v.as_deref().map_or("(absent)".to_owned(), safe);
            writeln!(
                out,
                "      changed {}: {} → {}",
                safe(if f.pointer.is_empty() {
                    "(root)"
                } else {
                    &f.pointer
                }),
                side(&f.old),
                side(&f.new)
            )?;
        }
        for e in &c.evidence {
            let pointer = if e.pointer.is_empty() {
                "(root)"
            } else {
                &e.pointer
            };
            writeln!(
                out,
                "      {} {}: {}",
                e.rule,
                safe(pointer),
                safe(&e.message())
            )?;
        }
    }
    for dup in &d.duplicates {
        writeln!(
            out,
            "  DUPLICATE {}: {} tools with this name before, {} now (kept apart, never merged)",
            safe(&dup.name),
            dup.old_count,
            dup.new_count
        )?;
    }
    if unchanged > 0 {
        writeln!(out, "  {unchanged} unchanged")?;
    }
    Ok(())
}

/// `observe`'s report for people.
pub fn observe_reports(
    out: &mut impl Write,
    reports: &[crate::observe::Report],
    taxonomy: plumbline_taxonomy::Taxonomy,
) -> Result<()> {
    for r in reports {
        let name = for_terminal(&r.server, false);
        if let Some(err) = r.outcome.error() {
            writeln!(out, "{name}: FAILED (observation {})", r.observation)?;
            for line in err.lines() {
                writeln!(out, "  {}", for_terminal(line, false))?;
            }
            continue;
        }
        match (&r.drift, r.baseline) {
            (Some(d), Some(base)) => {
                let changed = d.changes().count();
                if changed == 0 && d.duplicates.is_empty() {
                    writeln!(
                        out,
                        "{name}: ok, {} tools (observation {}, against {base}): no change",
                        r.tools, r.observation
                    )?;
                } else {
                    writeln!(
                        out,
                        "{name}: ok, {} tools (observation {}, against {base}): {} ({taxonomy}), {changed} changed",
                        r.tools, r.observation, d.severity
                    )?;
                    drift(out, d)?;
                }
            }
            _ => writeln!(
                out,
                "{name}: ok, {} tools (observation {}): first observation, the baseline from now on",
                r.tools, r.observation
            )?,
        }
        for n in &r.normalized {
            writeln!(
                out,
                "  normalised: {} {} (rule {})",
                for_terminal(&n.tool, false),
                for_terminal(&n.pointer, false),
                for_terminal(&n.rule, false)
            )?;
        }
        for p in &r.problems {
            let at = p.position.map(|i| format!(" at {i}")).unwrap_or_default();
            let tool = p
                .tool
                .as_deref()
                .map(|t| format!(" ({})", for_terminal(t, false)))
                .unwrap_or_default();
            writeln!(
                out,
                "  problem: {}{at}{tool}: {}",
                p.kind,
                for_terminal(&p.message, false)
            )?;
        }
    }
    Ok(())
}

/// Writes `value` as one JSON document (pretty when asked) and a newline,
/// with hidden and bidi characters as `\u` escapes: what Plumbline prints
/// as JSON is what a reviewer sees.
pub fn write_json(out: &mut impl Write, value: &impl serde::Serialize, pretty: bool) -> Result<()> {
    let text = if pretty {
        serde_json::to_string_pretty(value)?
    } else {
        serde_json::to_string(value)?
    };
    out.write_all(plumbline_base::sanitize::escape_hidden_in_json(&text).as_bytes())?;
    writeln!(out)?;
    Ok(())
}
