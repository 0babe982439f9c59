//! What made a rule fire (C21: evidence never changes severity or rules).

use serde::Serialize;

use crate::json::Value;
use crate::patterns::PatternKind;
use crate::severity::{RuleId, Severity};

/// Descriptions up to this many words get R08's measured edit count.
pub const R08_MEASURED_WORDS: usize = 5_000;

/// The result of classifying one tool change.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Classification {
    /// The highest severity among the fired rules; `NONE` when none fired.
    pub severity: Severity,
    /// The fired rules, sorted, without duplicates.
    pub rules: Vec<RuleId>,
    /// Why each rule fired, grouped by rule in rule order; within a rule,
    /// in the order it was found (document order).
    pub evidence: Vec<Evidence>,
}

/// One reason a rule fired.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Evidence {
    pub rule: RuleId,
    /// The RFC 6901 pointer of the value that made the rule fire.
    pub pointer: String,
    #[serde(flatten)]
    pub detail: Detail,
}

/// The typed facts behind a fired rule; messages are rendered from them.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Detail {
    /// R01: an invisible or bidi code point new in the field.
    InvisibleCodePoint {
        /// The code point itself; JSON writes it the Unicode way, `"U+200B"`
        /// (the published check-output schema), and [`u_plus`] renders it.
        #[serde(serialize_with = "serialize_u_plus")]
        code_point: char,
        name: &'static str,
    },
    /// R01: the HTML/XML comment marker `<!--` new in the field.
    CommentMarker { text: String },
    /// R02: a listed imperative phrase; R05: `mcp://` or a fixed phrase.
    Phrase {
        /// The phrase as listed.
        phrase: String,
        /// The text as it stands in the field (its case may differ).
        text: String,
    },
    /// R05: a `server/tool` token.
    ServerToolReference { text: String },
    /// R03: a match of one of the five patterns, new to the tool.
    Pattern { pattern: PatternKind, text: String },
    /// R04: a name newly required, with every clause of C15 that holds.
    Required {
        name: Value,
        clauses: Vec<RequiredClause>,
    },
    /// R06: a property newly added and not required.
    OptionalProperty { name: String },
    /// R07: a watched annotation moved toward greater capability.
    Annotation {
        key: String,
        /// The old value, absent when the key (or `annotations`) was absent.
        #[serde(skip_serializing_if = "Option::is_none")]
        old: Option<Value>,
        new: bool,
    },
    /// R07 (taxonomy-v2): a watched annotation's effective value (absent =
    /// the MCP default) moved toward greater capability.
    EffectiveAnnotation {
        key: String,
        /// The old value as written, absent when the key was.
        #[serde(skip_serializing_if = "Option::is_none")]
        old: Option<Value>,
        /// The new value as written, absent when the key is.
        #[serde(skip_serializing_if = "Option::is_none")]
        new: Option<Value>,
        /// The value a client now assumes.
        effective: bool,
    },
    /// R06 (taxonomy-v2): a required input whose name is new while as many
    /// required inputs disappeared: a renamed input.
    RenamedRequired { name: Value, disappeared: usize },
    /// R06 (taxonomy-v2): a newly required input whose property has a
    /// description.
    DocumentedRequired { name: Value },
    /// R05 (taxonomy-v2): a name of another tool, and how it was known.
    ToolReference { tool: String, by: ReferenceBy },
    /// R10: a sentence naming another tool holds a directive.
    ToolInstruction {
        tool: String,
        /// The directive phrase as listed.
        directive: String,
        /// The sentence, at most 200 characters.
        sentence: String,
    },
    /// R04 (taxonomy-v3): a newly required, undescribed input whose name
    /// asks for sensitive material or a side channel.
    SensitiveRequired {
        name: Value,
        /// The phrase of `sensitive-v3.txt` or `channels-v3.txt`.
        phrase: String,
    },
    /// R06 (taxonomy-v3): a newly required input neither described nor
    /// asking for anything R04 looks for.
    PlainRequired { name: Value },
    /// R16: an added tool that duplicates another tool.
    Duplicate {
        /// The other tool's name.
        tool: String,
        /// `"name"` (the same name in another style) or `"description"`.
        by: &'static str,
        /// `"sibling"` (the same listing) or `"foreign"` (another server).
        on: &'static str,
    },
    /// R19: a wording aimed at the model and a second signal in one field.
    SecondSignal {
        /// The R14 phrase as listed.
        cue: String,
        /// What else the field newly holds: `"endpoint"`, `"tool"` or
        /// `"sensitive"`.
        signal: &'static str,
        /// The endpoint, tool name or sensitive phrase.
        text: String,
    },
    /// R02, R14, R17, R18 (taxonomy-v3 2.14): a sentence that newly holds
    /// a construction.
    Construction {
        /// What the construction says.
        construction: &'static str,
        /// The words that make it, as found (`ignore … instructions`).
        words: String,
        /// The sentence, at most 200 characters.
        sentence: String,
    },
    /// R08: the description's word-level distance is at least 0.20.
    DescriptionRewrite {
        old_words: usize,
        new_words: usize,
        /// The edit distance is at least this (`⌊(denom − 1)/5⌋ + 1`, the
        /// smallest count with `edits × 5 ≥ denom`).
        min_edits: usize,
        /// The measured word edit distance; absent when a description has
        /// more than [`R08_MEASURED_WORDS`] words.
        #[serde(skip_serializing_if = "Option::is_none")]
        edits: Option<usize>,
        /// Deciding needed more than
        /// [`MAX_MEASURED_EDITS`](crate::text::MAX_MEASURED_EDITS) edits:
        /// not measured, counted as a rewrite.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        unmeasured: bool,
    },
    /// R09: one cosmetic change and why it is cosmetic.
    Cosmetic {
        reason: CosmeticReason,
        /// Word edits, when the distance branch applied.
        #[serde(skip_serializing_if = "Option::is_none")]
        edits: Option<usize>,
        denom: usize,
    },
}

/// How taxonomy-v2 knew that a word names another tool (2.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReferenceBy {
    /// The name of a tool on another observed server.
    Inventory,
    /// An identifier written as a tool: "the `x_y` tool", "call xY(".
    Form,
    /// An `mcp://` address.
    McpUri,
}

/// Which clause of C15 made R04 fire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RequiredClause {
    /// (1) an `Added` change at `/inputSchema/required/<n>`.
    AddedEntry,
    /// (2) a value in the new `required` array absent from the old one.
    NewMember,
    /// (3) a newly added property whose name is required.
    NewRequiredProperty,
}

/// Why R09 found a change cosmetic (C19).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CosmeticReason {
    /// Word-level distance below 0.20.
    SmallWordDistance,
    /// Equal after lowercasing and keeping only letters and digits.
    AlnumFoldEqual,
}

/// How a match is shown to people: a URL without the sentence
/// punctuation that followed it (`…/upload.` reads as `…/upload`). The
/// match itself, and the evidence's `text`, stay as the taxonomy defines.
fn shown_match(pattern: crate::patterns::PatternKind, text: &str) -> &str {
    if pattern == crate::patterns::PatternKind::Url {
        let trimmed = text.trim_end_matches(['.', ',', ';', ':', '!', '?']);
        // `…/upload)` only when the URL opened no parenthesis of its own.
        let trimmed = match trimmed.strip_suffix(')') {
            Some(t) if !t.contains('(') => t,
            _ => trimmed,
        };
        if trimmed.contains("://") && !trimmed.ends_with("://") {
            return trimmed;
        }
    }
    text
}

/// A code point as Unicode writes it: `U+` and at least four hex digits.
pub fn u_plus(c: char) -> String {
    format!("U+{:04X}", c as u32)
}

fn serialize_u_plus<S: serde::Serializer>(c: &char, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&u_plus(*c))
}

impl Evidence {
    /// A one-line, human description of this evidence. Server-supplied text
    /// is included as is: callers sanitise it for their medium.
    pub fn message(&self) -> String {
        match &self.detail {
            Detail::InvisibleCodePoint { code_point, name } => {
                format!("invisible code point {} {name}", u_plus(*code_point))
            }
            Detail::CommentMarker { text } => format!("comment marker {text:?}"),
            Detail::Phrase { phrase, text } if phrase == text => format!("phrase {phrase:?}"),
            Detail::Phrase { phrase, text } => format!("phrase {phrase:?} (as {text:?})"),
            Detail::ServerToolReference { text } => format!("server/tool reference {text:?}"),
            Detail::Pattern { pattern, text } => {
                format!(
                    "new {} {:?}",
                    pattern.describe(),
                    shown_match(*pattern, text)
                )
            }
            Detail::Required { name, clauses } => {
                let how: Vec<&str> = clauses
                    .iter()
                    .map(|c| match c {
                        RequiredClause::AddedEntry => "entry added to required",
                        RequiredClause::NewMember => "not required before",
                        RequiredClause::NewRequiredProperty => "new property",
                    })
                    .collect();
                format!("{name} is required ({})", how.join("; "))
            }
            Detail::OptionalProperty { name } => format!("new optional property {name:?}"),
            Detail::Annotation { key, old, new } => match old {
                Some(old) => format!("{key}: {old} → {new}"),
                None => format!("{key}: absent → {new}"),
            },
            Detail::EffectiveAnnotation {
                key,
                old,
                new,
                effective,
            } => {
                let shown = |v: &Option<Value>| match v {
                    Some(v) => v.to_string(),
                    None => "absent".to_owned(),
                };
                format!(
                    "{key}: {} → {} (a client now assumes {effective})",
                    shown(old),
                    shown(new)
                )
            }
            Detail::RenamedRequired { name, disappeared } => format!(
                "{name} is required in place of {disappeared} required input{} that disappeared",
                if *disappeared == 1 { "" } else { "s" }
            ),
            Detail::DocumentedRequired { name } => {
                format!("{name} is newly required, and described by its schema")
            }
            Detail::ToolReference { tool, by } => match by {
                ReferenceBy::Inventory => format!("names {tool:?}, a tool of another server"),
                ReferenceBy::Form => format!("names another tool, {tool:?}"),
                ReferenceBy::McpUri => format!("MCP address {tool:?}"),
            },
            Detail::ToolInstruction {
                tool,
                directive,
                sentence,
            } => format!("instructs about {tool:?} ({directive:?}): {sentence:?}"),
            Detail::SensitiveRequired { name, phrase } => {
                format!("{name} is newly required, undescribed, and asks for {phrase:?}")
            }
            Detail::PlainRequired { name } => format!("{name} is newly required"),
            Detail::Duplicate { tool, by, on } => {
                let whose = if *on == "sibling" {
                    "another tool of this server"
                } else {
                    "a tool of another server"
                };
                match *by {
                    "name" => format!("has the name of {tool:?}, {whose}, in another style"),
                    _ => format!("repeats the description of {tool:?}, {whose}"),
                }
            }
            Detail::Construction {
                construction,
                words,
                sentence,
            } => format!("{construction} ({words:?}): {sentence:?}"),
            Detail::SecondSignal { cue, signal, text } => {
                format!("{cue:?} together with a new {signal} {text:?}")
            }
            Detail::DescriptionRewrite {
                old_words,
                new_words,
                min_edits,
                edits,
                unmeasured,
            } => {
                // The measured share first, so that a one-word edit of a
                // five-word description does not read as a "large rewrite".
                let words = old_words.max(new_words);
                match edits {
                    None if *unmeasured => format!(
                        "description rewritten: more than {} of {words} words changed (not measured further; counted as ≥ 20%)",
                        crate::text::MAX_MEASURED_EDITS,
                    ),
                    Some(edits) => format!(
                        "{edits} of {words} words changed ({}%; R08 counts from 20%)",
                        edits * 100 / (*words).max(1)
                    ),
                    None => format!("at least {min_edits} of {words} words changed (≥ 20%)"),
                }
            }
            Detail::Cosmetic {
                reason: CosmeticReason::SmallWordDistance,
                edits,
                denom,
            } => {
                let edits = edits.unwrap_or(0);
                format!(
                    "cosmetic: {edits} word edit{} over {denom} words (< 0.20)",
                    if edits == 1 { "" } else { "s" }
                )
            }
            Detail::Cosmetic {
                reason: CosmeticReason::AlnumFoldEqual,
                ..
            } => "cosmetic: only case, punctuation or white space differ".to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patterns::PatternKind;

    fn url(text: &str) -> Evidence {
        Evidence {
            rule: RuleId::R03,
            pointer: "/description".into(),
            detail: Detail::Pattern {
                pattern: PatternKind::Url,
                text: text.into(),
            },
        }
    }

    #[test]
    fn a_code_point_is_a_char_in_the_model_and_u_plus_in_json_and_messages() {
        let tag = Evidence {
            rule: RuleId::R01,
            pointer: "/description".into(),
            detail: Detail::InvisibleCodePoint {
                code_point: '\u{E0041}',
                name: "TAG LATIN CAPITAL LETTER A",
            },
        };
        let json = serde_json::to_value(&tag).unwrap();
        assert_eq!(json["code_point"], "U+E0041");
        assert_eq!(u_plus('\u{200B}'), "U+200B");
        assert_eq!(
            tag.message(),
            "invisible code point U+E0041 TAG LATIN CAPITAL LETTER A"
        );
    }

    #[test]
    fn a_rewrite_shows_its_measured_edit_count_and_the_bound_only_when_unmeasured() {
        let rewrite = |edits| Evidence {
            rule: RuleId::R08,
            pointer: "/description".into(),
            detail: Detail::DescriptionRewrite {
                old_words: 7,
                new_words: 5,
                min_edits: 2,
                edits,
                unmeasured: false,
            },
        };
        assert_eq!(
            rewrite(Some(4)).message(),
            "4 of 7 words changed (57%; R08 counts from 20%)"
        );
        assert_eq!(
            rewrite(None).message(),
            "at least 2 of 7 words changed (≥ 20%)"
        );
    }

    #[test]
    fn one_edit_is_one_word_edit() {
        let cosmetic = |edits| Evidence {
            rule: RuleId::R09,
            pointer: "/description".into(),
            detail: Detail::Cosmetic {
                reason: CosmeticReason::SmallWordDistance,
                edits,
                denom: 11,
            },
        };
        assert_eq!(
            cosmetic(Some(1)).message(),
            "cosmetic: 1 word edit over 11 words (< 0.20)"
        );
        assert_eq!(
            cosmetic(Some(2)).message(),
            "cosmetic: 2 word edits over 11 words (< 0.20)"
        );
    }

    #[test]
    fn urls_are_shown_without_the_sentence_punctuation_after_them() {
        let e = url("https://collect.attacker.example/upload.");
        assert_eq!(
            e.message(),
            "new URL \"https://collect.attacker.example/upload\""
        );
        // The evidence itself keeps the match as the taxonomy defines it.
        let json = serde_json::to_value(&e).unwrap();
        assert_eq!(json["text"], "https://collect.attacker.example/upload.");
        assert_eq!(
            url("see https://a.example/x),").message(),
            "new URL \"see https://a.example/x\""
        );
        assert_eq!(
            url("https://en.example/wiki/A_(b)").message(),
            "new URL \"https://en.example/wiki/A_(b)\""
        );
        assert_eq!(url("https://").message(), "new URL \"https://\"");
    }
}
