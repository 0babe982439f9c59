//! `plumbline classify`: one pair from two files, or many from JSON Lines.

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::path::Path;

use anyhow::{bail, Context as _, Result};
use plumbline_taxonomy::json::{parse_tool, parse_with_depth, Value, MAX_DEPTH};
use plumbline_taxonomy::{Classification, Classifier, Inventory, RuleId, Severity, Taxonomy};
use serde::Serialize;

use crate::cli::{ClassifyArgs, Format};
use crate::exit::{threshold, Outcome};
use crate::render;

pub fn run(args: &ClassifyArgs) -> Result<Outcome> {
    let classifier = load_classifier(
        args.taxonomy.taxonomy.unwrap_or_default(),
        args.imperatives.as_deref(),
    )?;
    let inventory = match &args.inventory {
        Some(path) => read_inventory(path)?,
        None => Inventory::empty(),
    };
    if let Some(path) = &args.jsonl {
        return jsonl(&classifier, &inventory, path, args.fail_on, args.evidence);
    }
    let (Some(old_path), Some(new_path)) = (&args.old, &args.new) else {
        bail!("classify needs OLD.json and NEW.json, or --jsonl FILE");
    };
    if old_path == Path::new("-") && new_path == Path::new("-") {
        bail!("only one of OLD.json and NEW.json can be standard input (-)");
    }
    let old = read_tool(old_path)?;
    let new = read_tool(new_path)?;
    let classification = classifier.classify_in(&old, &new, &inventory);
    let mut out = io::stdout().lock();
    match args.format {
        Format::Human => render::classification(&mut out, old_path, new_path, &classification)?,
        Format::Json => {
            render::write_json(&mut out, &classification, false)?;
        }
    }
    out.flush()?;
    Ok(threshold(classification.severity, args.fail_on))
}

/// The classifier for `taxonomy`, with the imperative list of the file
/// at `imperatives` when one is given (an unusable file is an error naming
/// it).
pub fn load_classifier(taxonomy: Taxonomy, imperatives: Option<&Path>) -> Result<Classifier> {
    let Some(path) = imperatives else {
        return Ok(Classifier::for_taxonomy(taxonomy));
    };
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let text = String::from_utf8(bytes).map_err(|e| {
        anyhow::anyhow!(
            "{}: invalid UTF-8 at byte {}",
            path.display(),
            e.utf8_error().valid_up_to()
        )
    })?;
    Classifier::with_imperatives(taxonomy, &text)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// The tool names of a saved listing (a tools/list result, an array of
/// tools, or JSON Lines of tools), as the siblings of the tool classified.
/// taxonomy-v3 also reads their descriptions (R16).
fn read_inventory(path: &Path) -> Result<Inventory> {
    let listing = crate::tools_input::read_listing_tools(path)?;
    Ok(listing
        .iter()
        .fold(Inventory::empty(), |inventory, (name, description)| {
            inventory.with_sibling_tool(name, description.as_deref())
        }))
}

/// Reads one tool from `path` (`-` is standard input).
fn read_tool(path: &Path) -> Result<Value> {
    let bytes = if path == Path::new("-") {
        let mut buf = Vec::new();
        io::stdin()
            .read_to_end(&mut buf)
            .context("reading standard input")?;
        buf
    } else {
        std::fs::read(path).with_context(|| format!("reading {}", path.display()))?
    };
    parse_tool(&bytes).map_err(|e| anyhow::anyhow!("{}: {e}", display_name(path)))
}

fn display_name(path: &Path) -> String {
    if path == Path::new("-") {
        "<stdin>".to_owned()
    } else {
        path.display().to_string()
    }
}

#[derive(Serialize)]
struct LineResult<'a> {
    id: &'a Value,
    severity: Severity,
    rules: &'a [RuleId],
    #[serde(skip_serializing_if = "Option::is_none")]
    evidence: Option<&'a [plumbline_taxonomy::Evidence]>,
}

#[derive(Serialize)]
struct LineError<'a> {
    id: &'a Value,
    error: String,
}

/// Classifies each line of `path` as it is read: memory is bounded by the
/// longest line, and the output keeps input order.
fn jsonl(
    classifier: &Classifier,
    inventory: &Inventory,
    path: &Path,
    fail_on: Option<Severity>,
    evidence: bool,
) -> Result<Outcome> {
    let reader: Box<dyn BufRead> = if path == Path::new("-") {
        Box::new(io::stdin().lock())
    } else {
        let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
        Box::new(BufReader::with_capacity(1 << 16, file))
    };
    let mut out = BufWriter::new(io::stdout().lock());
    let outcome = jsonl_stream(
        classifier,
        inventory,
        reader,
        &mut out,
        &display_name(path),
        fail_on,
        evidence,
    )?;
    out.flush()?;
    Ok(outcome)
}

pub fn jsonl_stream(
    classifier: &Classifier,
    inventory: &Inventory,
    mut reader: impl BufRead,
    out: &mut impl Write,
    name: &str,
    fail_on: Option<Severity>,
    evidence: bool,
) -> Result<Outcome> {
    let mut outcome = Outcome::Clean;
    let mut line = Vec::new();
    let mut buffer = Vec::new();
    let mut number = 0usize;
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .with_context(|| format!("reading {name}"))?;
        if n == 0 {
            break;
        }
        number += 1;
        if line.iter().all(|b| b.is_ascii_whitespace()) {
            continue;
        }
        buffer.clear();
        match classify_line(classifier, inventory, &line) {
            Ok((id, c)) => {
                outcome = outcome.and(threshold(c.severity, fail_on));
                serde_json::to_writer(
                    &mut buffer,
                    &LineResult {
                        id: &id,
                        severity: c.severity,
                        rules: &c.rules,
                        evidence: evidence.then_some(c.evidence.as_slice()),
                    },
                )?;
            }
            Err((id, message)) => {
                outcome = outcome.and(Outcome::InputError);
                serde_json::to_writer(
                    &mut buffer,
                    &LineError {
                        id: &id,
                        error: format!("{name}: line {number}: {message}"),
                    },
                )?;
            }
        }
        // Hidden and bidi characters (in an id or evidence) as escapes; a
        // line of ASCII, the usual case, is written as it is.
        if buffer.is_ascii() {
            out.write_all(&buffer)?;
        } else {
            let text = String::from_utf8_lossy(&buffer);
            out.write_all(plumbline_base::sanitize::escape_hidden_in_json(&text).as_bytes())?;
        }
        out.write_all(b"\n")?;
    }
    Ok(outcome)
}

/// One JSON Lines record. On failure, returns the record's id when it
/// could be read (else null) and what is wrong.
fn classify_line(
    classifier: &Classifier,
    inventory: &Inventory,
    line: &[u8],
) -> Result<(Value, Classification), (Value, String)> {
    // Each tool sits one level below the record and gets the full C1 limit.
    let record = parse_with_depth(line, MAX_DEPTH + 1).map_err(|e| {
        let at = format!("column {}: {}", e.column, e.kind);
        (Value::Null, at)
    })?;
    let Value::Object(mut fields) = record else {
        return Err((
            Value::Null,
            format!("expected a JSON object, found {}", record.kind()),
        ));
    };
    let id = fields.remove("id").unwrap_or(Value::Null);
    // `"old": null`: a tool added to its listing (drift's policy).
    let added = matches!(fields.get("old"), Some(Value::Null));
    let mut take = |key: &str| match fields.remove(key) {
        Some(v @ Value::Object(_)) => Ok(v),
        Some(other) => Err(format!(
            "\"{key}\" is {}, expected a JSON object (an MCP tool)",
            other.kind()
        )),
        None => Err(format!("\"{key}\" is missing")),
    };
    let old = if added {
        Ok(Value::Object(plumbline_taxonomy::json::Object::new()))
    } else {
        take("old")
    };
    let new = take("new");
    let own = match fields.get("inventory") {
        None => None,
        Some(v) => Some(
            plumbline_taxonomy::corpus::inventory_for(Some(v), classifier.taxonomy())
                .map_err(|e| (id.clone(), format!("\"inventory\": {e}")))?,
        ),
    };
    let inventory = own.as_ref().unwrap_or(inventory);
    match (old, new) {
        (Ok(_), Ok(new)) if added => Ok((id, classifier.classify_added(&new, inventory))),
        (Ok(old), Ok(new)) => Ok((id, classifier.classify_in(&old, &new, inventory))),
        (Err(e), _) | (_, Err(e)) => Err((id, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_lines(input: &str, fail_on: Option<Severity>) -> (String, Outcome) {
        let mut out = Vec::new();
        let outcome = jsonl_stream(
            &Classifier::default(),
            &Inventory::empty(),
            input.as_bytes(),
            &mut out,
            "t.jsonl",
            fail_on,
            false,
        )
        .unwrap();
        (String::from_utf8(out).unwrap(), outcome)
    }

    #[test]
    fn bad_lines_are_reported_and_the_run_goes_on() {
        let input = concat!(
            r#"{"id":"a","old":{"name":"x"},"new":{"name":"x","description":"you must"}}"#,
            "\n\n",
            "{not json\n",
            r#"{"id":7,"old":{},"new":[]}"#,
            "\n",
            r#"{"id":{"k":1},"old":{},"new":{}}"#,
            "\r\n",
        );
        let (out, outcome) = run_lines(input, None);
        assert_eq!(
            out,
            concat!(
                r#"{"id":"a","severity":"CRITICAL","rules":["R02"]}"#,
                "\n",
                r#"{"id":null,"error":"t.jsonl: line 3: column 2: unexpected character 'n'"}"#,
                "\n",
                r#"{"id":7,"error":"t.jsonl: line 4: \"new\" is an array, expected a JSON object (an MCP tool)"}"#,
                "\n",
                r#"{"id":{"k":1},"severity":"NONE","rules":[]}"#,
                "\n",
            )
        );
        assert_eq!(outcome, Outcome::InputError);
    }

    #[test]
    fn fail_on_applies_to_every_line() {
        let input = r#"{"id":1,"old":{},"new":{"description":"see https://x.example.com"}}"#;
        assert_eq!(
            run_lines(input, Some(Severity::High)).1,
            Outcome::ThresholdReached
        );
        assert_eq!(run_lines(input, Some(Severity::Critical)).1, Outcome::Clean);
        assert_eq!(run_lines(input, None).1, Outcome::Clean);
    }
}
