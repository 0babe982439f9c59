//! `check`'s machine and pull-request outputs: SARIF 2.1.0 and Markdown.

use std::path::Path;

use plumbline_drift::Change;
use plumbline_taxonomy::sanitize::for_terminal;
use plumbline_taxonomy::{RuleId, Severity, Taxonomy};
use serde_json::{json, Value};

use crate::exit::Outcome;
use crate::gate::{ServerCheck, Status};

/// SARIF levels: HIGH and CRITICAL fail a scan, MEDIUM warns, LOW notes.
fn level(severity: Severity) -> &'static str {
    match severity {
        Severity::Critical | Severity::High => "error",
        Severity::Medium => "warning",
        Severity::Low => "note",
        Severity::None => "none",
    }
}

fn rule_index(taxonomy: Taxonomy, rule: RuleId) -> usize {
    taxonomy
        .rules()
        .iter()
        .position(|r| *r == rule)
        .unwrap_or(0)
}

fn change_label(change: &Change) -> String {
    match change {
        Change::Added => "added".into(),
        Change::Removed => "removed".into(),
        Change::Changed => "changed".into(),
        Change::Unchanged => "unchanged".into(),
        Change::Renamed { from } => format!("renamed from {from}"),
        Change::Unreadable { reason } => format!("unreadable ({reason})"),
    }
}

/// One SARIF run: every taxonomy rule with its documentation, one result
/// per fired rule per tool, located in the lock file; servers that could
/// not be evaluated as tool execution notifications.
pub fn sarif(results: &[ServerCheck], lock: &Path, taxonomy: Taxonomy) -> Value {
    let lock_uri = lock.to_string_lossy().replace('\\', "/");
    let rules: Vec<Value> = taxonomy
        .rules()
        .iter()
        .map(|r| {
            let doc = r.documentation();
            json!({
                "id": r.as_str(),
                "name": r.title().replace(|c: char| !c.is_ascii_alphanumeric(), ""),
                "shortDescription": {"text": r.title()},
                "fullDescription": {"text": format!("{} — {}: {}", r.as_str(), r.severity(), r.title())},
                "help": {"text": doc, "markdown": doc},
                "defaultConfiguration": {"level": level(r.severity())},
                "properties": {"severity": r.severity().as_str(), "taxonomy": taxonomy.id()},
            })
        })
        .collect();
    let mut sarif_results = Vec::new();
    let mut notifications = Vec::new();
    for r in results {
        let Some(drift) = &r.drift else {
            let what = if r.status == Status::Unpinned {
                ""
            } else {
                " could not be evaluated:"
            };
            notifications.push(json!({
                "level": "error",
                "message": {"text": format!("{}:{what} {}", r.server, r.error.as_deref().unwrap_or("unknown"))},
            }));
            continue;
        };
        for t in drift.changes() {
            if let Change::Unreadable { reason } = &t.change {
                notifications.push(json!({
                    "level": "error",
                    "message": {"text": format!("{}/{}: could not be read, so not graded: {reason}", r.server, t.name)},
                }));
            }
            for rule in &t.classification.rules {
                let evidence: Vec<String> = t
                    .classification
                    .evidence
                    .iter()
                    .filter(|e| e.rule == *rule)
                    .map(|e| format!("{}: {}", e.pointer, e.message()))
                    .collect();
                sarif_results.push(json!({
                    "ruleId": rule.as_str(),
                    "ruleIndex": rule_index(taxonomy, *rule),
                    "level": level(rule.severity()),
                    "message": {"text": format!(
                        "{}/{} ({}): {}. {}",
                        r.server, t.name, change_label(&t.change), rule.title(), evidence.join("; ")
                    )},
                    "locations": [{
                        "physicalLocation": {"artifactLocation": {"uri": lock_uri, "index": 0}},
                        "logicalLocations": [{"name": t.name, "fullyQualifiedName": format!("{}/{}", r.server, t.name), "kind": "function"}],
                    }],
                    "partialFingerprints": {"plumbline/server-tool-rule/v1": format!("{}/{}/{}", r.server, t.name, rule.as_str())},
                    "properties": {
                        "server": r.server,
                        "tool": t.name,
                        "change": change_label(&t.change),
                        "severity": rule.severity().as_str(),
                        "evidence": t.classification.evidence.iter().filter(|e| e.rule == *rule).collect::<Vec<_>>(),
                    },
                }));
            }
        }
    }
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "plumbline",
                "version": env!("CARGO_PKG_VERSION"),
                "informationUri": "https://github.com/plumbline/plumbline",
                "rules": rules,
            }},
            "artifacts": [{"location": {"uri": lock_uri}}],
            "properties": {"taxonomy": taxonomy.id()},
            "invocations": [{
                "executionSuccessful": notifications.is_empty(),
                "toolExecutionNotifications": notifications,
            }],
            "results": sarif_results,
        }],
    })
}

/// Server text made safe for Markdown: no control or invisible characters
/// (shown as `\u{…}`), no character that Markdown or HTML would act on,
/// and nothing GitHub would turn into a link or a notification: a word
/// joiner (U+2060) after every `@` (mentions, e-mail addresses) and inside
/// `://` and `www.` (bare URLs), which entity escapes cannot prevent since
/// those are recognised after entities are decoded.
fn md(s: &str) -> String {
    const JOINER: char = '\u{2060}';
    let text = for_terminal(s, false);
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(c) = rest.chars().next() {
        if rest.starts_with("://") {
            out.push_str(&format!(":/{JOINER}/"));
            rest = &rest[3..];
            continue;
        }
        if rest
            .get(..4)
            .is_some_and(|h| h.eq_ignore_ascii_case("www."))
        {
            out.push_str(&rest[..3]);
            out.push(JOINER);
            out.push('.');
            rest = &rest[4..];
            continue;
        }
        match c {
            '\\' | '`' | '*' | '_' | '[' | ']' | '(' | ')' | '#' | '|' | '!' | '~' | '>' | '<'
            | '&' => {
                out.push_str(&format!("&#{};", c as u32));
            }
            '@' => {
                out.push('@');
                out.push(JOINER);
            }
            c => out.push(c),
        }
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// A summary fit for a pull-request comment, evidence collapsed.
pub fn markdown(
    results: &[ServerCheck],
    outcome: Outcome,
    fail_on: Severity,
    lock: &Path,
    taxonomy: Taxonomy,
) -> String {
    let mark = if outcome == Outcome::Clean {
        "✅"
    } else {
        "❌"
    };
    let verdict = format!("{mark} {}", crate::gate::verdict(results, outcome, fail_on));
    let mut s = format!(
        "## Plumbline check: {verdict}\n\nChecked {} servers against `{}` ({}).\n\n| server | result | changed tools |\n|---|---|---|\n",
        results.len(),
        md(&lock.display().to_string()),
        taxonomy.id()
    );
    for r in results {
        match &r.drift {
            Some(d) => s.push_str(&format!(
                "| {} | {} | {} |\n",
                md(&r.server),
                d.severity,
                d.changes().count()
            )),
            None if r.status == Status::Unpinned => {
                s.push_str(&format!("| {} | not pinned | |\n", md(&r.server)))
            }
            None => s.push_str(&format!(
                "| {} | could not be evaluated | |\n",
                md(&r.server)
            )),
        }
    }
    for step in crate::gate::next_steps(results, outcome, fail_on, false) {
        s.push_str(&format!("\n**Next:** {}\n", md(&step)));
    }
    for r in results {
        let Some(d) = &r.drift else {
            let what = if r.status == Status::Unpinned {
                ""
            } else {
                " could not be evaluated:"
            };
            s.push_str(&format!(
                "\n**{}**{what} {}\n",
                md(&r.server),
                md(r.error.as_deref().unwrap_or("unknown"))
            ));
            continue;
        };
        if d.changes().count() == 0 {
            continue;
        }
        s.push_str(&format!(
            "\n<details><summary>{}: {}</summary>\n\n",
            md(&r.server),
            d.severity
        ));
        for t in d.changes() {
            let rules: Vec<&str> = t.classification.rules.iter().map(|r| r.as_str()).collect();
            // The kind is ours; every name and reason is the server's.
            let (kind, detail) = match &t.change {
                Change::Renamed { from } => ("RENAMED".to_owned(), format!(" (from {})", md(from))),
                Change::Unreadable { reason } => (
                    "UNREADABLE".to_owned(),
                    format!(" (could not be read, so not graded: {})", md(reason)),
                ),
                other => (other.kind().to_uppercase(), String::new()),
            };
            s.push_str(&format!(
                "- **{kind}** {}{detail}: {}{}\n",
                md(&t.name),
                t.severity,
                if t.is_new_for_review() {
                    " (new tool: review)".to_owned()
                } else if rules.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", rules.join(", "))
                }
            ));
            for e in &t.classification.evidence {
                s.push_str(&format!(
                    "  - {} {}: {}\n",
                    e.rule,
                    md(&e.pointer),
                    md(&e.message())
                ));
            }
        }
        s.push_str("\n</details>\n");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_escapes_what_markdown_and_html_would_act_on() {
        assert_eq!(
            md("<script>alert(1)</script>"),
            "&#60;script&#62;alert&#40;1&#41;&#60;/script&#62;"
        );
        assert_eq!(
            md("a\u{202e}b *x* `y`"),
            "a&#92;u{202e}b &#42;x&#42; &#96;y&#96;"
        );
        // Multi-byte characters anywhere (no slicing inside one): every
        // position of every short text of these characters.
        assert_eq!(md("a…b é…"), "a…b é…");
        let alphabet = ['w', 'W', '.', ':', '/', '@', '…', 'é', '😀', 'x'];
        for len in 0..=5u32 {
            for n in 0..alphabet.len().pow(len) {
                let text: String = (0..len)
                    .map(|i| alphabet[n / alphabet.len().pow(i) % alphabet.len()])
                    .collect();
                let _ = md(&text);
            }
        }
        assert_eq!(
            md("@team see https://a.example or WWW.b.example"),
            "@\u{2060}team see https:/\u{2060}/a.example or WWW\u{2060}.b.example"
        );
    }
}
