//! What a server publishes about its authorization, observation to
//! observation: a new issuer, scopes added or dropped, an endpoint moved.
//!
//! Each observation of a server behind OAuth records one document
//! (`plumbline_auth::metadata::published`): `{"resource_metadata": …,
//! "authorization_server": …}`, canonical JSON. A change is told field by
//! field against the server's previous document: for a list of strings
//! (scopes, authorization servers, methods) what was added and removed,
//! for anything else the value before and after. An observation that
//! could not read the document records none, which is not a change.

use serde::Serialize;
use serde_json::{Map, Value};

use super::*;

/// How what the server publishes about its authorization changed at an
/// observation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuthorizationChange {
    /// The observation whose document this one's differs from.
    #[serde(rename = "previous_observation", serialize_with = "id_number")]
    pub previous: ObservationId,
    /// Each field that changed, by document then field name.
    pub fields: Vec<FieldChange>,
}

fn id_number<S: serde::Serializer>(id: &ObservationId, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_i64(id.0)
}

/// One field of one of the two documents.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldChange {
    /// `resource_metadata` (RFC 9728) or `authorization_server`
    /// (RFC 8414).
    pub document: &'static str,
    /// The member's name; empty when the whole document appeared or went.
    pub field: String,
    /// For a list of strings: the strings added.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub added: Vec<String>,
    /// For a list of strings: the strings removed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub removed: Vec<String>,
    /// Otherwise the value before, as compact JSON (`None`: absent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before: Option<String>,
    /// And after.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
}

impl FieldChange {
    /// One line for people: `authorization server issuer: "a" → "b"`,
    /// `resource metadata scopes_supported: +mcp:admin -mcp:read`.
    pub fn describe(&self) -> String {
        let document = self.document.replace('_', " ");
        let subject = if self.field.is_empty() {
            document
        } else {
            format!("{document} {}", self.field)
        };
        if !self.added.is_empty() || !self.removed.is_empty() {
            let mut parts: Vec<String> = self.added.iter().map(|s| format!("+{s}")).collect();
            parts.extend(self.removed.iter().map(|s| format!("-{s}")));
            return format!("{subject}: {}", parts.join(" "));
        }
        let shown = |v: &Option<String>| v.clone().unwrap_or_else(|| "(none)".to_owned());
        format!(
            "{subject}: {} → {}",
            shown(&self.before),
            shown(&self.after)
        )
    }
}

impl AuthorizationChange {
    /// Every field's [`FieldChange::describe`], joined by "; ".
    pub fn describe(&self) -> String {
        self.fields
            .iter()
            .map(FieldChange::describe)
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// How the authorization document recorded with `summary` differs from
/// the server's previous one; `None` when it recorded none, when it is
/// the first, or when it is the same.
pub fn authorization_change(
    store: &impl Store,
    summary: &ObservationSummary,
) -> Result<Option<AuthorizationChange>, Failure> {
    let Some(digest) = summary.authorization else {
        return Ok(None);
    };
    let Some(previous) = store.latest_authorization(&summary.server, Some(summary.id))? else {
        return Ok(None);
    };
    if previous.authorization == Some(digest) {
        return Ok(None);
    }
    let read = |d: Option<Digest>, id: ObservationId| -> Result<Vec<u8>, Failure> {
        let missing = |detail: String| {
            Failure::Store(plumbline_store::StoreError::Corrupt {
                path: std::path::PathBuf::new(),
                detail,
            })
        };
        // Found by its document, so it names one, unless the store lost it.
        let d = d.ok_or_else(|| {
            missing(format!(
                "observation {id} names an authorization document that is missing"
            ))
        })?;
        store
            .document_by_digest(&d)?
            .ok_or_else(|| missing(format!("the authorization document {d} is missing")))
    };
    let before = read(previous.authorization, previous.id)?;
    let after = read(Some(digest), summary.id)?;
    Ok(Some(AuthorizationChange {
        previous: previous.id,
        fields: field_changes(&before, &after),
    }))
}

/// The fields that differ between two authorization documents.
pub fn field_changes(before: &[u8], after: &[u8]) -> Vec<FieldChange> {
    let parse = |b: &[u8]| serde_json::from_slice::<Value>(b).unwrap_or(Value::Null);
    let (before, after) = (parse(before), parse(after));
    let mut out = Vec::new();
    for document in ["resource_metadata", "authorization_server"] {
        let (b, a) = (&before[document], &after[document]);
        if b == a {
            continue;
        }
        match (b.as_object(), a.as_object()) {
            (Some(b), Some(a)) => members(document, b, a, &mut out),
            _ => out.push(FieldChange {
                document,
                field: String::new(),
                added: Vec::new(),
                removed: Vec::new(),
                before: (!b.is_null()).then(|| b.to_string()),
                after: (!a.is_null()).then(|| a.to_string()),
            }),
        }
    }
    out
}

fn members(
    document: &'static str,
    before: &Map<String, Value>,
    after: &Map<String, Value>,
    out: &mut Vec<FieldChange>,
) {
    let names: BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    for name in names {
        let (b, a) = (before.get(name), after.get(name));
        if b == a {
            continue;
        }
        let strings = |v: Option<&Value>| -> Option<Vec<String>> {
            match v {
                None => Some(Vec::new()),
                Some(Value::Array(items)) => items
                    .iter()
                    .map(|i| i.as_str().map(str::to_owned))
                    .collect(),
                Some(_) => None,
            }
        };
        let lists = match (strings(b), strings(a)) {
            (Some(bs), Some(as_)) if b.is_some() || a.is_some() => {
                let added: Vec<String> = as_.iter().filter(|s| !bs.contains(s)).cloned().collect();
                let removed: Vec<String> =
                    bs.iter().filter(|s| !as_.contains(s)).cloned().collect();
                // Only reordered: told as before and after.
                (!added.is_empty() || !removed.is_empty()).then_some((added, removed))
            }
            _ => None,
        };
        let (added, removed, before, after) = match lists {
            Some((added, removed)) if b.is_some() && a.is_some() => (added, removed, None, None),
            _ => (
                Vec::new(),
                Vec::new(),
                b.map(Value::to_string),
                a.map(Value::to_string),
            ),
        };
        out.push(FieldChange {
            document,
            field: name.clone(),
            added,
            removed,
            before,
            after,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(resource: &str, server: &str) -> Vec<u8> {
        format!(r#"{{"authorization_server":{server},"resource_metadata":{resource}}}"#)
            .into_bytes()
    }

    #[test]
    fn a_new_issuer_and_new_scopes_are_told_by_field() {
        let before = doc(
            r#"{"authorization_servers":["https://as.example"],"resource":"https://mcp.example/mcp","scopes_supported":["mcp:read"]}"#,
            r#"{"issuer":"https://as.example","scopes_supported":["mcp:read","offline_access"],"token_endpoint":"https://as.example/token"}"#,
        );
        let after = doc(
            r#"{"authorization_servers":["https://evil.example"],"resource":"https://mcp.example/mcp","scopes_supported":["mcp:read","mcp:admin"]}"#,
            r#"{"issuer":"https://evil.example","scopes_supported":["mcp:read","offline_access"],"token_endpoint":"https://evil.example/token"}"#,
        );
        let fields = field_changes(&before, &after);
        let told: Vec<String> = fields.iter().map(FieldChange::describe).collect();
        assert_eq!(
            told,
            [
                "resource metadata authorization_servers: +https://evil.example -https://as.example",
                "resource metadata scopes_supported: +mcp:admin",
                r#"authorization server issuer: "https://as.example" → "https://evil.example""#,
                r#"authorization server token_endpoint: "https://as.example/token" → "https://evil.example/token""#,
            ]
        );
    }

    #[test]
    fn a_field_that_appears_or_goes_and_a_document_that_goes() {
        let before = doc(
            r#"{"resource":"r","authorization_servers":["a"]}"#,
            r#"{"issuer":"a","code_challenge_methods_supported":["S256"]}"#,
        );
        let after = doc(
            r#"{"resource":"r","authorization_servers":["a"],"scopes_supported":["x"]}"#,
            "null",
        );
        let told: Vec<String> = field_changes(&before, &after)
            .iter()
            .map(FieldChange::describe)
            .collect();
        assert_eq!(
            told,
            [
                r#"resource metadata scopes_supported: (none) → ["x"]"#,
                r#"authorization server: {"code_challenge_methods_supported":["S256"],"issuer":"a"} → (none)"#,
            ]
        );
    }

    #[test]
    fn the_same_document_or_a_reordered_list_is_no_added_or_removed() {
        let a = doc(r#"{"scopes_supported":["x","y"]}"#, "null");
        assert!(field_changes(&a, &a).is_empty());
        let b = doc(r#"{"scopes_supported":["y","x"]}"#, "null");
        let fields = field_changes(&a, &b);
        assert_eq!(fields.len(), 1);
        assert!(fields[0].added.is_empty() && fields[0].removed.is_empty());
        assert_eq!(fields[0].before.as_deref(), Some(r#"["x","y"]"#));
    }
}
