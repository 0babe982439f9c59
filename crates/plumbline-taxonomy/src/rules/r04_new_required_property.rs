//! R04 — HIGH — New required inputSchema property (spec 4.4, C15).
#![doc = include_str!("r04_new_required_property.md")]

use super::{Context, Found};
use crate::diff::ChangeKind;
use crate::evidence::{Detail, Evidence, RequiredClause};
use crate::fields::Seg;
use crate::json::{Object, Value};
use crate::severity::RuleId;

pub const DOC: &str = include_str!("r04_new_required_property.md");

/// `/inputSchema/required` when it is an array (C15: anything else counts
/// as empty).
pub(crate) fn required(tool: &Value) -> Option<&[Value]> {
    tool.get("inputSchema")?.get("required")?.as_array()
}

/// Keys of `/inputSchema/properties` of `new` that are not keys of the old
/// one (C16: a missing or non-object `properties` counts as empty), sorted.
pub(crate) fn newly_added_properties<'a>(old: &Value, new: &'a Value) -> Vec<&'a str> {
    let Some(new_props) = properties(new) else {
        return Vec::new();
    };
    // Both key lists are sorted: one merge finds the new keys.
    let mut old_keys = properties(old)
        .into_iter()
        .flat_map(Object::keys)
        .peekable();
    new_props
        .keys()
        .filter(|k| {
            while old_keys.next_if(|o| o < k).is_some() {}
            old_keys.peek() != Some(k)
        })
        .collect()
}

fn properties(tool: &Value) -> Option<&Object> {
    tool.get("inputSchema")?.get("properties")?.as_object()
}

/// Whether the string `name` is in a `required` array.
pub(crate) fn is_required(required: Option<&[Value]>, name: &str) -> bool {
    required.is_some_and(|r| r.iter().any(|v| v.as_str() == Some(name)))
}

/// taxonomy-v2's newly required names (`docs/taxonomy-v2.md` 4.4): names
/// in the new `required` array that the old one lacked (as JSON values),
/// and newly added properties that are required; and how many required
/// inputs disappeared (required before, now neither required nor a
/// property). When no more names were gained than inputs disappeared, the
/// inputs were renamed: R06, not R04.
pub(crate) struct RequiredChange {
    /// (pointer, name, clauses), in the order first met.
    pub gained: Vec<(String, Value, Vec<RequiredClause>)>,
    pub disappeared: usize,
}

impl RequiredChange {
    pub fn of(old: &Value, new: &Value) -> RequiredChange {
        let new_required = required(new);
        let old_required = required(old).unwrap_or(&[]);
        let mut gained: Vec<(String, Value, Vec<RequiredClause>)> = Vec::new();
        for (i, v) in new_required.unwrap_or(&[]).iter().enumerate() {
            if !old_required.contains(v) && !gained.iter().any(|(_, n, _)| n == v) {
                gained.push((
                    format!("/inputSchema/required/{i}"),
                    v.clone(),
                    vec![RequiredClause::NewMember],
                ));
            }
        }
        for name in newly_added_properties(old, new) {
            if is_required(new_required, name) {
                let value = Value::String(name.into());
                match gained.iter_mut().find(|(_, n, _)| *n == value) {
                    Some((_, _, clauses)) => clauses.push(RequiredClause::NewRequiredProperty),
                    None => {
                        let mut pointer = String::from("/inputSchema/properties");
                        crate::pointer::push_token(&mut pointer, name);
                        gained.push((pointer, value, vec![RequiredClause::NewRequiredProperty]));
                    }
                }
            }
        }
        let new_props = properties(new);
        let disappeared = old_required
            .iter()
            .filter_map(Value::as_str)
            .filter(|n| {
                !is_required(new_required, n) && !new_props.is_some_and(|p| p.contains_key(n))
            })
            .count();
        RequiredChange {
            gained,
            disappeared,
        }
    }

    /// Whether the gained names are renamed inputs, not new ones.
    pub fn is_rename(&self) -> bool {
        !self.gained.is_empty() && self.gained.len() <= self.disappeared
    }
}

/// Whether the new schema describes the input `name`: its property has a
/// `description` holding a letter or digit. (A `title` does not count:
/// SDKs write one from the name.)
pub(crate) fn is_documented(new: &Value, name: &Value) -> bool {
    let Some(name) = name.as_str() else {
        return false;
    };
    properties(new)
        .and_then(|p| p.get(name))
        .and_then(|p| p.get("description"))
        .and_then(Value::as_str)
        .is_some_and(|d| d.chars().any(char::is_alphanumeric))
}

fn check_v2(ctx: &Context<'_>) -> Found {
    let change = ctx.required_change();
    if change.is_rename() {
        return Vec::new();
    }
    change
        .gained
        .iter()
        .filter(|(_, name, _)| !is_documented(ctx.new, name))
        .map(|(pointer, name, clauses)| Evidence {
            rule: RuleId::R04,
            pointer: pointer.clone(),
            detail: Detail::Required {
                name: name.clone(),
                clauses: clauses.clone(),
            },
        })
        .collect()
}

/// taxonomy-v3 (4.4): the first phrase of `sensitive-v3.txt` or
/// `channels-v3.txt` (list order) in the words of an input's name.
pub(crate) fn asks_for(ctx: &Context<'_>, name: &Value) -> Option<String> {
    let lexicon = ctx.lexicon()?;
    let words = super::name_words(name.as_str()?);
    let hit = lexicon.scan_name(&words).into_iter().next()?;
    Some(lexicon.phrase(hit.category, hit.index).to_owned())
}

/// taxonomy-v3: a gained, undescribed input fires only when its name asks
/// for sensitive material or a side channel; R06 takes the others.
fn check_v3(ctx: &Context<'_>) -> Found {
    let change = ctx.required_change();
    if change.is_rename() {
        return Vec::new();
    }
    let mut found = Vec::new();
    for (pointer, name, _) in &change.gained {
        if is_documented(ctx.new, name) {
            continue;
        }
        if let Some(phrase) = asks_for(ctx, name) {
            found.push(Evidence {
                rule: RuleId::R04,
                pointer: pointer.clone(),
                detail: Detail::SensitiveRequired {
                    name: name.clone(),
                    phrase,
                },
            });
        }
    }
    found
}

pub(crate) fn check(ctx: &Context<'_>) -> Found {
    if ctx.taxonomy == crate::taxonomy::Taxonomy::V3 {
        return check_v3(ctx);
    }
    if ctx.is_v2() {
        return check_v2(ctx);
    }
    let new_required = required(ctx.new);
    let old_required = required(ctx.old).unwrap_or(&[]);
    // One piece of evidence per name, listing every clause that holds,
    // in the order the names are first met.
    let mut names: Vec<(String, Value, Vec<RequiredClause>)> = Vec::new();
    let mut note = |pointer: String, name: &Value, clause| match names
        .iter_mut()
        .find(|(_, n, _)| n == name)
    {
        Some((_, _, clauses)) if !clauses.contains(&clause) => clauses.push(clause),
        Some(_) => {}
        None => names.push((pointer, name.clone(), vec![clause])),
    };
    if let Some(new_required) = new_required {
        // Clause 1: an entry added to the array (this also catches a
        // duplicate of a name that was already required).
        for c in ctx.changes {
            // `<n>` is an integer: an array index (an object key made of
            // digits cannot occur here, since `required` is an array).
            let added_entry = matches!(
                c.path.as_slice(),
                [Seg::Key("inputSchema"), Seg::Key("required"), Seg::Index(_)]
            );
            if c.kind == ChangeKind::Added && added_entry {
                if let Some(v) = c.new {
                    note(c.pointer(), v, RequiredClause::AddedEntry);
                }
            }
        }
        // Clause 2: a value absent from the old array (as JSON values).
        for (i, v) in new_required.iter().enumerate() {
            if !old_required.contains(v) {
                note(
                    format!("/inputSchema/required/{i}"),
                    v,
                    RequiredClause::NewMember,
                );
            }
        }
    }
    // Clause 3: a newly added property whose name is required, even when
    // the old array already listed it (spec 4.6: "MUST fire R04").
    for name in newly_added_properties(ctx.old, ctx.new) {
        if is_required(new_required, name) {
            let mut pointer = String::from("/inputSchema/properties");
            crate::pointer::push_token(&mut pointer, name);
            note(
                pointer,
                &Value::String(name.into()),
                RequiredClause::NewRequiredProperty,
            );
        }
    }
    names
        .into_iter()
        .map(|(pointer, name, mut clauses)| {
            clauses.sort();
            Evidence {
                rule: RuleId::R04,
                pointer,
                detail: Detail::Required { name, clauses },
            }
        })
        .collect()
}
