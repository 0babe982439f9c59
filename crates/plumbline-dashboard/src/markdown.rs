//! Just enough Markdown for the rule documents (`crates/plumbline-taxonomy/
//! src/rules/r0N_*.md`, the text `plumbline explain` prints): headings,
//! fenced code, bullet lists with continuation lines, paragraphs, and
//! inline code spans.
//!
//! The documents are ours, but they are rendered like any other text:
//! parsed into blocks and written through maud, which escapes everything,
//! so a rule document can never inject markup either.

use maud::{html, Markup};

#[derive(Debug, PartialEq, Eq)]
enum Block {
    Heading(u8, String),
    Code(String),
    List(Vec<String>),
    Paragraph(String),
}

fn parse(doc: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut paragraph: Vec<&str> = Vec::new();
    let mut list: Vec<String> = Vec::new();
    let mut code: Option<Vec<&str>> = None;

    fn flush(blocks: &mut Vec<Block>, paragraph: &mut Vec<&str>, list: &mut Vec<String>) {
        if !paragraph.is_empty() {
            blocks.push(Block::Paragraph(paragraph.join(" ")));
            paragraph.clear();
        }
        if !list.is_empty() {
            blocks.push(Block::List(std::mem::take(list)));
        }
    }

    for line in doc.lines() {
        if let Some(lines) = code.as_mut() {
            if line.trim_start().starts_with("```") {
                blocks.push(Block::Code(lines.join("\n")));
                code = None;
            } else {
                lines.push(line);
            }
            continue;
        }
        let trimmed = line.trim();
        if trimmed.starts_with("```") {
            flush(&mut blocks, &mut paragraph, &mut list);
            code = Some(Vec::new());
        } else if trimmed.is_empty() {
            flush(&mut blocks, &mut paragraph, &mut list);
        } else if let Some((level, text)) = heading(trimmed) {
            flush(&mut blocks, &mut paragraph, &mut list);
            blocks.push(Block::Heading(level, text.to_owned()));
        } else if let Some(item) = trimmed.strip_prefix("- ") {
            if !paragraph.is_empty() {
                flush(&mut blocks, &mut paragraph, &mut list);
            }
            list.push(item.to_owned());
        } else if !list.is_empty() && line.starts_with(' ') {
            if let Some(last) = list.last_mut() {
                last.push(' ');
                last.push_str(trimmed);
            }
        } else {
            if !list.is_empty() {
                flush(&mut blocks, &mut paragraph, &mut list);
            }
            paragraph.push(trimmed);
        }
    }
    if let Some(lines) = code {
        blocks.push(Block::Code(lines.join("\n")));
    }
    flush(&mut blocks, &mut paragraph, &mut list);
    blocks
}

fn heading(line: &str) -> Option<(u8, &str)> {
    let hashes = line.bytes().take_while(|b| *b == b'#').count();
    let rest = line.get(hashes..)?;
    ((1..=6).contains(&hashes) && rest.starts_with(' ')).then(|| (hashes as u8, rest.trim()))
}

/// Text with `code spans`: alternate runs, odd ones are code.
fn inline(text: &str) -> Markup {
    html! {
        @for (i, part) in text.split('`').enumerate() {
            @if i % 2 == 1 { code { (part) } } @else { (part) }
        }
    }
}

/// The document as HTML. Headings are shifted down one level so the page
/// keeps a single `<h1>`.
pub fn render(doc: &str) -> Markup {
    html! {
        @for block in parse(doc) {
            @match block {
                Block::Heading(1, t) => h2 { (inline(&t)) },
                Block::Heading(2, t) => h3 { (inline(&t)) },
                Block::Heading(_, t) => h4 { (inline(&t)) },
                Block::Code(t) => pre { code { (t) } },
                Block::List(items) => ul { @for item in &items { li { (inline(item)) } } },
                Block::Paragraph(t) => p { (inline(&t)) },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_of_a_rule_document() {
        let doc = "# R01 — Title\n\n## What\n\nA field gains\n`<!--` here.\n\n```text\nU+200B <x>\n```\n\n- one\n  continued\n- two\nAfter.\n";
        assert_eq!(
            parse(doc),
            [
                Block::Heading(1, "R01 — Title".into()),
                Block::Heading(2, "What".into()),
                Block::Paragraph("A field gains `<!--` here.".into()),
                Block::Code("U+200B <x>".into()),
                Block::List(vec!["one continued".into(), "two".into()]),
                Block::Paragraph("After.".into()),
            ]
        );
        let html = render(doc).into_string();
        assert!(html.contains("<h2>R01 — Title</h2>"), "{html}");
        assert!(html.contains("<code>&lt;!--</code>"), "{html}");
        assert!(
            html.contains("<pre><code>U+200B &lt;x&gt;</code></pre>"),
            "{html}"
        );
        assert!(html.contains("<li>one continued</li>"), "{html}");
    }

    #[test]
    fn every_rule_document_renders_with_its_title() {
        for rule in plumbline_taxonomy::RuleId::ALL {
            let html = render(rule.documentation()).into_string();
            assert!(html.contains(rule.title()), "{rule}");
            assert!(!html.contains("<script"), "{rule}");
        }
    }
}
