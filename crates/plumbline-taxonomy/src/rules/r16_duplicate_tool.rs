//! R16 — HIGH — Duplicate of another tool (taxonomy-v3 4.16).
#![doc = include_str!("r16_duplicate_tool.md")]

use super::{Context, Found};
use crate::evidence::{Detail, Evidence};
use crate::json::Value;
use crate::severity::RuleId;
use crate::text::{word_distance, words};

pub const DOC: &str = include_str!("r16_duplicate_tool.md");

/// The fewest words a description needs before two of them can be called
/// the same: "Lists files." is not a duplicate of "Lists files." on
/// another server in any sense that matters.
pub const MIN_WORDS: usize = 4;

/// The fewest comparable words a description needs before a longer one
/// that holds it whole, past twice its length, is called its copy (draft
/// 4): "Deletes a file from disk." is whole inside many longer ones.
pub const MIN_WHOLE_COPY_WORDS: usize = 6;

/// The fewest comparable words a shortened copy of another server's tool
/// needs before its words, in any order, all found in the other's
/// description make it a copy (draft 6).
pub const MIN_REORDERED_WORDS: usize = 6;

/// A name with its style removed: ASCII-lowercased, without `-`, `_`,
/// `.` and spaces (drift's rename test, `docs/taxonomy-v2.md` 6).
pub fn styleless(name: &str) -> String {
    name.chars()
        .filter(|c| !matches!(c, '-' | '_' | '.' | ' '))
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// A description's words for comparison (2.13): its words (C10)
/// lowercased (C8), letters and digits only, without the articles `a`,
/// `an`, `the`.
pub fn comparable_words(text: &str) -> Vec<String> {
    comparable(text, false)
}

/// The same words split at every character that is not a letter or digit
/// instead (`plain-text` is `plain text`; taxonomy-v3 draft 2).
pub fn split_comparable_words(text: &str) -> Vec<String> {
    comparable(text, true)
}

fn comparable(text: &str, split: bool) -> Vec<String> {
    let mut out = Vec::new();
    for w in words(text) {
        let lowered = crate::text::lower(w);
        let pieces = lowered.split(|c: char| !c.is_alphanumeric());
        if split {
            out.extend(pieces.map(str::to_owned));
        } else {
            out.push(pieces.collect());
        }
    }
    out.retain(|w| !w.is_empty() && !matches!(w.as_str(), "a" | "an" | "the"));
    out
}

/// Whether `shorter` occurs in `longer` in order, gaps allowed.
fn is_subsequence(shorter: &[String], longer: &[String]) -> bool {
    let mut rest = longer.iter();
    shorter.iter().all(|w| rest.any(|l| l == w))
}

/// Two descriptions say the same (4.16): their comparable words are less
/// than 0.20 apart (spec 2.4's measure and threshold), or the words of the
/// shorter occur in order in the longer, which has at most twice as many.
/// Each needs at least [`MIN_WORDS`] comparable words.
pub fn same_description(a: &str, b: &str) -> bool {
    same_words(&comparable_words(a), &comparable_words(b), false)
        || same_words(
            &split_comparable_words(a),
            &split_comparable_words(b),
            false,
        )
}

/// [`same_description`] on comparable words, `mine` (the added tool's)
/// against `theirs`; with `shortened_any` (draft 3: `theirs` is another
/// server's tool) `mine` may be a shortened copy of any length. A
/// lengthened copy keeps the bound either way: a short description is in
/// order inside many long ones.
fn same_words(mine: &[String], theirs: &[String], shortened_any: bool) -> bool {
    if mine.len() < MIN_WORDS || theirs.len() < MIN_WORDS {
        return false;
    }
    let (shorter, longer) = if mine.len() <= theirs.len() {
        (mine, theirs)
    } else {
        (theirs, mine)
    };
    // Lists whose lengths differ by n are n edits apart or more (checked
    // first: it costs nothing); a copy is at least half as long, unless
    // it is a shortened copy of another server's tool.
    let close = (longer.len() - shorter.len()) * 5 < longer.len();
    let length_ok =
        longer.len() <= 2 * shorter.len() || (shortened_any && mine.len() <= theirs.len());
    if length_ok && is_subsequence(shorter, longer) {
        return true;
    }
    // Draft 6: a shortened copy of another server's tool with its words
    // reordered ("Search Drive files by name" from "Search files in Google
    // Drive by name"): every word of it is a word of the other.
    if shortened_any && mine.len() <= theirs.len() && mine.len() >= MIN_REORDERED_WORDS {
        // Looked up in a set: a description may hold thousands of words.
        let words: rustc_hash::FxHashSet<&str> = theirs.iter().map(String::as_str).collect();
        if mine.iter().all(|w| words.contains(w.as_str())) {
            return true;
        }
    }
    // Draft 4: a copy kept whole inside a longer description, at any
    // length ("lengthened" with sentences before or after it).
    // Words hold no space, so a run of words is a run of the joined text
    // between spaces (found in linear time, not window by window).
    if !length_ok
        && shorter.len() >= MIN_WHOLE_COPY_WORDS
        && memchr::memmem::find(
            format!(" {} ", longer.join(" ")).as_bytes(),
            format!(" {} ", shorter.join(" ")).as_bytes(),
        )
        .is_some()
    {
        return true;
    }
    close && word_distance(&mine.join(" "), &theirs.join(" ")).below_one_fifth()
}

/// The most name words of a tool's name read to tell tools apart (a
/// hostile name may be a megabyte long; real ones have a handful).
const MAX_NAME_WORDS: usize = 16;

/// The name words (2.11) of `a` that are not name words of `b` (the
/// first [`MAX_NAME_WORDS`] of each).
fn own_name_words(a: &str, b: &str) -> Vec<String> {
    let theirs = super::name_words(b);
    let theirs: Vec<&str> = theirs.split(' ').take(MAX_NAME_WORDS).collect();
    super::name_words(a)
        .split(' ')
        .take(MAX_NAME_WORDS)
        .filter(|w| !w.is_empty() && !theirs.contains(w))
        .map(str::to_owned)
        .collect()
}

/// Whether a description *mentions* a name word (draft 4): one of its
/// comparable words (2.13) contains it, or contains it without a final
/// `s` when it has at least four characters ("queues" in "queue",
/// "requests" in "pullrequests", "mail" in "email").
fn mentions(words: &[String], word: &str) -> bool {
    let bare = word.strip_suffix('s').filter(|b| b.len() >= 3);
    words
        .iter()
        .any(|w| w.contains(word) || bare.is_some_and(|b| w.contains(b)))
}

/// Two tools of one server are told apart by their descriptions (draft
/// 4): a name word of at least three characters of one tool that the
/// other's name lacks is mentioned by its own description and not by the
/// other's: "Insert one or more rows" beside "Delete one or more rows"
/// for `insert_rows` and `delete_sheet_rows`.
fn told_apart(mine: (&str, &[String]), theirs: (&str, &[String])) -> bool {
    let apart = |a: (&str, &[String]), b: (&str, &[String])| {
        own_name_words(a.0, b.0)
            .iter()
            .filter(|w| w.chars().count() >= 3)
            .any(|w| mentions(a.1, w) && !mentions(b.1, w))
    };
    apart(mine, theirs) || apart(theirs, mine)
}

/// The most inventory tools an added tool's description is compared with
/// (`docs/taxonomy-v3.md` 12): the first ones given. Names are compared
/// with every tool.
pub const MAX_DESCRIPTION_COMPARISONS: usize = 1024;

/// Only an added tool can shadow another (drift grades it against `{}`):
/// a changed tool was already beside the others.
pub(crate) fn check(ctx: &Context<'_>) -> Found {
    let mut found = Vec::new();
    if !ctx.added || ctx.inventory.tools().is_empty() {
        return found;
    }
    let Some(name) = ctx.new.get("name").and_then(Value::as_str) else {
        return found;
    };
    let own_style = styleless(name);
    let mine = ctx
        .new
        .get("description")
        .and_then(Value::as_str)
        .map(|d| (comparable_words(d), split_comparable_words(d)));
    for (i, tool) in ctx.inventory.tools().iter().enumerate() {
        // A sibling of the same name is the tool itself; a foreign tool of
        // the same name is another server's, which this one now shadows.
        if tool.name == name && !tool.foreign {
            continue;
        }
        let by = if !own_style.is_empty() && styleless(&tool.name) == own_style {
            "name"
        } else if let (Some(mine), Some(theirs_text), true) = (
            &mine,
            tool.description.as_deref(),
            i < MAX_DESCRIPTION_COMPARISONS,
        ) {
            let foreign = tool.foreign;
            let theirs = comparable_words(theirs_text);
            if (same_words(&mine.0, &theirs, foreign)
                || same_words(&mine.1, &split_comparable_words(theirs_text), foreign))
                && (foreign || !told_apart((name, &mine.0), (&tool.name, &theirs)))
            {
                "description"
            } else {
                continue;
            }
        } else {
            continue;
        };
        found.push(Evidence {
            rule: RuleId::R16,
            pointer: "/name".to_owned(),
            detail: Detail::Duplicate {
                tool: tool.name.clone(),
                by,
                on: if tool.foreign { "foreign" } else { "sibling" },
            },
        });
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_are_compared_with_the_first_tools_only() {
        use crate::{json::parse_tool, Classifier, Inventory, RuleId, Taxonomy};
        let text = "Search the web for pages, news and images with freshness filters.";
        let added =
            parse_tool(format!(r#"{{"name":"lookup_pages","description":"{text}"}}"#).as_bytes())
                .unwrap();
        let classifier = Classifier::for_taxonomy(Taxonomy::V3);
        let inventory_with_copy_at = |at: usize| {
            (0..MAX_DESCRIPTION_COMPARISONS + 10).fold(Inventory::empty(), |inv, i| {
                let description = if i == at {
                    text.to_owned()
                } else {
                    format!("Tool number {i} does something else entirely.")
                };
                inv.with_sibling_tool(&format!("tool_{i}"), Some(&description))
            })
        };
        let fired = |inventory: &Inventory| {
            classifier
                .classify_added(&added, inventory)
                .rules
                .contains(&RuleId::R16)
        };
        assert!(fired(&inventory_with_copy_at(
            MAX_DESCRIPTION_COMPARISONS - 1
        )));
        assert!(!fired(&inventory_with_copy_at(MAX_DESCRIPTION_COMPARISONS)));
        // Names are compared with every tool.
        let late_name = inventory_with_copy_at(usize::MAX)
            .with_sibling_tool("lookupPages", Some("Another description entirely."));
        assert!(fired(&late_name));
    }

    #[test]
    fn names_tell_template_siblings_apart() {
        let words = |t: &str| comparable_words(t);
        let (insert, delete) = (
            words("Insert one or more rows at the given row."),
            words("Delete one or more rows at the given row."),
        );
        assert!(told_apart(
            ("insert_rows", &insert),
            ("delete_sheet_rows", &delete)
        ));
        // The words of the names are in neither description, or in both.
        let copy = words("Posts a text message to a channel.");
        assert!(!told_apart(
            ("post_message", &copy),
            ("send_message", &copy)
        ));
        let (email, mail) = (
            words("Sends an e-mail to one or more recipients."),
            words("Sends an email message to one or more recipients."),
        );
        assert!(!told_apart(("send_email", &email), ("send_mail", &mail)));
        // A plural name word is mentioned by its singular; short words
        // (`id`, `a`) tell nothing apart.
        assert!(mentions(&words("Get a queue."), "queues"));
        assert!(!told_apart(
            ("get_by_id", &words("Get a page.")),
            ("get_page", &words("Get a page by id."))
        ));
    }

    #[test]
    fn names_lose_their_style() {
        assert_eq!(styleless("read_file"), styleless("readFile"));
        assert_eq!(styleless("read-file"), "readfile");
        assert_ne!(styleless("read_files"), styleless("read_file"));
    }

    #[test]
    fn descriptions_are_the_same_when_close_or_a_shortened_copy() {
        let original = "Get a detailed listing of all files and directories in a specified path.";
        assert!(same_description(original, original));
        assert!(same_description(
            original,
            "Gets the detailed listing of all files and directories in a specified path."
        ));
        // A shortened copy: the shorter's words in order in the longer.
        assert!(same_description(
            original,
            "Listing of all files in a path."
        ));
        assert!(!same_description(original, "Read a file."));
        assert!(!same_description(
            "Lists open issues of a repository.",
            "Lists open pull requests of a repository."
        ));
        // Too few comparable words to call anything a copy.
        assert!(!same_description("Reads a file.", "Reads a file."));
    }
}
