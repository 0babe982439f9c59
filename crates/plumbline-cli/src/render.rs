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
    match args.format {
        Format::Human => {
            for rule in RuleId::ALL {
                writeln!(
                    out,
                    "{rule}  {:<8}  {}",
                    rule.severity().as_str(),
                    rule.title()
                )?;
            }
        }
        Format::Json => {
            let rows: Vec<RuleRow> = RuleId::ALL
                .into_iter()
                .map(|id| RuleRow {
                    id,
                    severity: id.severity(),
                    title: id.title(),
                })
                .collect();
            serde_json::to_writer(&mut out, &rows)?;
            writeln!(out)?;
        }
    }
    out.flush()?;
    Ok(())
}

pub fn explain(args: &ExplainArgs) -> Result<()> {
    let mut out = io::stdout().lock();
    out.write_all(args.rule.documentation().as_bytes())?;
    out.flush()?;
    Ok(())
}
