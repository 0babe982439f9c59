//! The rule documents (`crates/plumbline-taxonomy/src/rules/r0N_*.md`, the
//! text `plumbline explain` prints) as HTML, with pulldown-cmark: headings,
//! fenced code, nested lists, emphasis and inline code, as CommonMark reads
//! them (a hand-written reader before lost list structure).
//!
//! The documents are ours, but they are rendered like any other text: raw
//! HTML in them is shown as text, never passed through, so a rule document
//! can never inject markup either. Headings move down one level (the page
//! has its own `h1`), and the page leads with why the rule matters: the
//! "Why it matters" section comes first.

use maud::{Markup, PreEscaped};
use pulldown_cmark::{Event, HeadingLevel, Options, Parser, Tag, TagEnd};

/// The section a rule page leads with.
const WHY: &str = "## Why it matters";

/// `doc` with its "Why it matters" section moved before the first other
/// section (after the title and any text before the first `## `).
fn why_first(doc: &str) -> String {
    let Some(why_at) = doc.find(WHY) else {
        return doc.to_owned();
    };
    let why_end = doc[why_at + WHY.len()..]
        .find("\n## ")
        .map_or(doc.len(), |i| why_at + WHY.len() + i + 1);
    let why = &doc[why_at..why_end];
    let rest = format!("{}{}", &doc[..why_at], &doc[why_end..]);
    let Some(first) = rest.find("\n## ") else {
        return doc.to_owned();
    };
    let mut out = String::with_capacity(doc.len() + 2);
    out.push_str(&rest[..first + 1]);
    out.push_str(why.trim_end());
    out.push_str("\n\n");
    out.push_str(&rest[first + 1..]);
    out
}

/// A rule document as HTML.
pub fn render(doc: &str) -> Markup {
    let doc = why_first(doc);
    let lower = |level: HeadingLevel| match level {
        HeadingLevel::H1 => HeadingLevel::H2,
        HeadingLevel::H2 => HeadingLevel::H3,
        HeadingLevel::H3 => HeadingLevel::H4,
        _ => HeadingLevel::H5,
    };
    let events = Parser::new_ext(&doc, Options::ENABLE_STRIKETHROUGH).map(|event| match event {
        // Markup in the text is shown, not obeyed.
        Event::Html(text) | Event::InlineHtml(text) => Event::Text(text),
        Event::Start(Tag::Heading {
            level,
            id,
            classes,
            attrs,
        }) => Event::Start(Tag::Heading {
            level: lower(level),
            id,
            classes,
            attrs,
        }),
        Event::End(TagEnd::Heading(level)) => Event::End(TagEnd::Heading(lower(level))),
        other => other,
    });
    let mut html = String::with_capacity(doc.len() * 2);
    pulldown_cmark::html::push_html(&mut html, events);
    PreEscaped(html)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rule_document_keeps_its_structure_and_shows_markup_as_text() {
        let doc = "# R01 — Title\n\n## What it detects\n\nA field gains\n`<!--` here, and <b>bold</b>.\n\n```text\nU+200B <x>\n```\n\n- one\n  continued\n  - nested\n- two\n\n## Why it matters\n\nBecause.\n\n## Example\n\nNone.\n";
        let html = render(doc).into_string();
        assert!(html.contains("<h2>R01 — Title</h2>"), "{html}");
        assert!(html.contains("<code>&lt;!--</code>"), "{html}");
        assert!(html.contains("&lt;b&gt;bold&lt;/b&gt;"), "{html}");
        assert!(!html.contains("<b>"), "{html}");
        assert!(
            html.contains("<pre><code class=\"language-text\">U+200B &lt;x&gt;\n</code></pre>"),
            "{html}"
        );
        assert!(
            html.contains("<li>one\ncontinued\n<ul>\n<li>nested</li>"),
            "{html}"
        );
        let why = html.find("<h3>Why it matters</h3>").expect("why");
        let what = html.find("<h3>What it detects</h3>").expect("what");
        assert!(why < what, "leads with why: {html}");
        assert!(
            html.find("<h3>Example</h3>").is_some_and(|e| e > what),
            "{html}"
        );
    }

    #[test]
    fn every_rule_document_renders_with_its_title_and_leads_with_why() {
        for rule in plumbline_taxonomy::RuleId::ALL {
            let html = render(rule.documentation()).into_string();
            assert!(html.contains(rule.title()), "{rule}");
            assert!(!html.contains("<script"), "{rule}");
            assert!(html.contains("<li>"), "{rule}: its lists are lists");
            if let (Some(why), Some(what)) =
                (html.find("Why it matters"), html.find("What it detects"))
            {
                assert!(why < what, "{rule} leads with why");
            }
        }
    }
}
