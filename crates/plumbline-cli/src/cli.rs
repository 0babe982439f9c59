//! Command-line arguments.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use plumbline_taxonomy::{RuleId, Severity};

/// Plumbline grades changes to the tools an MCP server publishes, with the
/// deterministic taxonomy-v1 severity rules.
#[derive(Debug, Parser)]
#[command(name = "plumbline", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Classify the change between two versions of one tool.
    ///
    /// Exit status: 0 when the result is below --fail-on (or no --fail-on
    /// is given), 1 when it is at or above it, 2 when an input could not
    /// be read or parsed.
    Classify(ClassifyArgs),
    /// List the taxonomy-v1 rules with their severities and titles.
    Rules(RulesArgs),
    /// Print a rule's documentation.
    Explain(ExplainArgs),
}

#[derive(Debug, Args)]
pub struct ClassifyArgs {
    /// The tool before the change (a JSON object).
    #[arg(
        value_name = "OLD.json",
        required_unless_present = "jsonl",
        conflicts_with = "jsonl"
    )]
    pub old: Option<PathBuf>,

    /// The tool after the change (a JSON object).
    #[arg(
        value_name = "NEW.json",
        required_unless_present = "jsonl",
        conflicts_with = "jsonl"
    )]
    pub new: Option<PathBuf>,

    /// Classify many pairs: each line of FILE (`-` for standard input) is
    /// `{"id": ..., "old": {...}, "new": {...}}` and gives one output line
    /// `{"id": ..., "severity": ..., "rules": [...]}`, in input order. A bad
    /// line gives `{"id": ..., "error": "..."}` and the run goes on.
    #[arg(long, value_name = "FILE")]
    pub jsonl: Option<PathBuf>,

    /// Output format (single-pair mode).
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,

    /// Replace the built-in imperative phrase list (taxonomy/imperatives-v1.txt).
    #[arg(long, value_name = "FILE")]
    pub imperatives: Option<PathBuf>,

    /// Exit with status 1 when a result is at or above this severity.
    #[arg(long, value_name = "SEVERITY", value_parser = parse_severity)]
    pub fail_on: Option<Severity>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// A report for people.
    Human,
    /// One JSON object: {"severity", "rules", "evidence"}.
    Json,
}

#[derive(Debug, Args)]
pub struct RulesArgs {
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// The rule code, e.g. R03.
    #[arg(value_parser = parse_rule)]
    pub rule: RuleId,
}

fn parse_severity(s: &str) -> Result<Severity, String> {
    s.parse()
        .map_err(|e: plumbline_taxonomy::severity::UnknownSeverity| e.to_string())
}

fn parse_rule(s: &str) -> Result<RuleId, String> {
    s.parse()
        .map_err(|e: plumbline_taxonomy::severity::UnknownRule| e.to_string())
}
