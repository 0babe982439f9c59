//! Discovery (MCP authorization, 2025-11-25 and 2026-07-28): the protected
//! resource metadata of the server (RFC 9728), then its authorization
//! server's metadata (RFC 8414 or OpenID Connect Discovery), each checked
//! against what it claims to describe.

use reqwest::Url;
use serde::Deserialize;

use crate::error::{excerpt, AuthError};
use crate::http::{shown_url, Http};

/// A server's protected resource metadata (RFC 9728 §2).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ResourceMetadata {
    pub resource: String,
    #[serde(default)]
    pub authorization_servers: Vec<String>,
    #[serde(default)]
    pub scopes_supported: Option<Vec<String>>,
}

/// An authorization server's metadata (RFC 8414 §2), the fields the flow
/// reads.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ServerMetadata {
    pub issuer: String,
    #[serde(default)]
    pub authorization_endpoint: Option<String>,
    #[serde(default)]
    pub token_endpoint: Option<String>,
    #[serde(default)]
    pub registration_endpoint: Option<String>,
    #[serde(default)]
    pub scopes_supported: Option<Vec<String>>,
    #[serde(default)]
    pub grant_types_supported: Option<Vec<String>>,
    #[serde(default)]
    pub token_endpoint_auth_methods_supported: Option<Vec<String>>,
    #[serde(default)]
    pub code_challenge_methods_supported: Option<Vec<String>>,
    #[serde(default)]
    pub client_id_metadata_document_supported: Option<bool>,
    #[serde(default)]
    pub authorization_response_iss_parameter_supported: Option<bool>,
}

/// Where a server's protected resource metadata may be, in the order to
/// try when its challenge names none: the path-inserted form, then the
/// root (RFC 9728 §3.1).
pub fn resource_metadata_urls(server: &str) -> Result<Vec<String>, AuthError> {
    let url = Url::parse(server)
        .map_err(|e| AuthError::Configuration(format!("{}: {e}", shown_url(server))))?;
    let origin = url.origin().ascii_serialization();
    let path = url.path().trim_end_matches('/');
    let root = format!("{origin}/.well-known/oauth-protected-resource");
    Ok(if path.is_empty() {
        vec![root]
    } else {
        vec![format!("{root}{path}"), root]
    })
}

/// Where an issuer's metadata may be, in the MCP specification's order:
/// for an issuer with a path, RFC 8414 and OpenID Connect with the
/// well-known part inserted before the path, then OpenID Connect appended
/// to it; for one without, the two at the root. Never the root for an
/// issuer with a path: that would be another issuer's.
pub fn server_metadata_urls(issuer: &str) -> Result<Vec<String>, AuthError> {
    let url = Url::parse(issuer)
        .map_err(|e| AuthError::Discovery(format!("issuer {}: {e}", shown_url(issuer))))?;
    if url.query().is_some() || url.fragment().is_some() {
        return Err(AuthError::Discovery(format!(
            "issuer {} has a query or fragment (RFC 8414 §2)",
            shown_url(issuer)
        )));
    }
    let origin = url.origin().ascii_serialization();
    let path = url.path().trim_end_matches('/');
    Ok(if path.is_empty() {
        vec![
            format!("{origin}/.well-known/oauth-authorization-server"),
            format!("{origin}/.well-known/openid-configuration"),
        ]
    } else {
        vec![
            format!("{origin}/.well-known/oauth-authorization-server{path}"),
            format!("{origin}/.well-known/openid-configuration{path}"),
            format!("{origin}{path}/.well-known/openid-configuration"),
        ]
    })
}

/// Whether a protected resource metadata document's `resource` describes
/// the server at `server`: the same origin, and its path the server's
/// path or a path-segment prefix of it (a document at the root names the
/// origin).
pub fn resource_matches(resource: &str, server: &str) -> bool {
    let (Ok(r), Ok(s)) = (Url::parse(resource), Url::parse(server)) else {
        return false;
    };
    if r.origin() != s.origin() || r.fragment().is_some() {
        return false;
    }
    let rp = r.path().trim_end_matches('/');
    let sp = s.path().trim_end_matches('/');
    rp.is_empty()
        || sp == rp
        || sp
            .strip_prefix(rp)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// Whether the flow may use `url`: HTTPS, or plain HTTP to this machine
/// (a loopback address or `localhost`). Tokens, codes and secrets never
/// travel in clear text off the machine.
pub fn secure(url: &str) -> bool {
    let Ok(u) = Url::parse(url) else {
        return false;
    };
    match u.scheme() {
        "https" => true,
        "http" => match u.host() {
            Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
            Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
            Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
            None => false,
        },
        _ => false,
    }
}

/// Refuses a URL the flow may not use ([`secure`]).
pub fn must_be_secure(url: &str, what: &str) -> Result<(), AuthError> {
    if secure(url) {
        Ok(())
    } else {
        Err(AuthError::Discovery(format!(
            "{what} {} is neither HTTPS nor on this machine: refused",
            shown_url(url)
        )))
    }
}

/// Reads a JSON document: `Ok(None)` when the URL answers 404 (or another
/// 4xx: nothing there), an error for anything else that is not 200 JSON.
async fn document<T: serde::de::DeserializeOwned>(
    http: &Http,
    url: &str,
    what: &str,
) -> Result<Option<T>, AuthError> {
    let Some(body) = body_of(http, url, what).await? else {
        return Ok(None);
    };
    serde_json::from_slice(&body).map(Some).map_err(|e| {
        AuthError::Discovery(format!("{what} at {} is not readable: {e}", shown_url(url)))
    })
}

/// The body of a 200 answer; `Ok(None)` for a 4xx ([`document`]).
async fn body_of(http: &Http, url: &str, what: &str) -> Result<Option<Vec<u8>>, AuthError> {
    must_be_secure(url, what)?;
    let answer = http.get(url).await?;
    match answer.status {
        200 => Ok(Some(answer.body)),
        400..=499 => Ok(None),
        status => Err(AuthError::Discovery(format!(
            "{what} at {}: HTTP {status}{}",
            shown_url(url),
            match answer.location {
                Some(l) if (300..400).contains(&status) =>
                    format!(" to {} (not followed)", shown_url(&l)),
                _ => format!(": {}", excerpt(&answer.body, 200)),
            }
        ))),
    }
}

/// The server's protected resource metadata: from the challenge's URL if
/// it named one, else from the well-known URLs in order; its `resource`
/// must describe `server`.
pub async fn resource_metadata(
    http: &Http,
    server: &str,
    named: Option<&str>,
) -> Result<ResourceMetadata, AuthError> {
    let urls = match named {
        Some(url) => vec![url.to_owned()],
        None => resource_metadata_urls(server)?,
    };
    for url in &urls {
        let Some(found) =
            document::<ResourceMetadata>(http, url, "protected resource metadata").await?
        else {
            continue;
        };
        if !resource_matches(&found.resource, server) {
            return Err(AuthError::Discovery(format!(
                "the protected resource metadata at {} describes {}, not this server: refused",
                shown_url(url),
                shown_url(&found.resource)
            )));
        }
        if found.authorization_servers.is_empty() {
            return Err(AuthError::Discovery(format!(
                "the protected resource metadata at {} names no authorization server",
                shown_url(url)
            )));
        }
        return Ok(found);
    }
    Err(AuthError::Discovery(format!(
        "no protected resource metadata at {}",
        urls.iter()
            .map(|u| shown_url(u))
            .collect::<Vec<_>>()
            .join(" or ")
    )))
}

/// The metadata of the authorization server `issuer` (exactly as the
/// resource metadata names it): the first well-known URL that has a
/// document; its `issuer` must be `issuer`, character for character
/// (RFC 8414 §3.3), and it must offer PKCE with S256.
pub async fn server_metadata(http: &Http, issuer: &str) -> Result<ServerMetadata, AuthError> {
    let urls = server_metadata_urls(issuer)?;
    for url in &urls {
        let Some(found) =
            document::<ServerMetadata>(http, url, "authorization server metadata").await?
        else {
            continue;
        };
        if found.issuer != issuer {
            return Err(AuthError::Discovery(format!(
                "the metadata at {} names the issuer {}, not {}: refused (RFC 8414 §3.3)",
                shown_url(url),
                excerpt(found.issuer.as_bytes(), 100),
                shown_url(issuer)
            )));
        }
        let s256 = found
            .code_challenge_methods_supported
            .as_ref()
            .is_some_and(|m| m.iter().any(|m| m == "S256"));
        let grants = found.grant_types_supported.as_deref().unwrap_or(&[]);
        let only_machines = !grants.is_empty() && grants.iter().all(|g| g == "client_credentials");
        if !s256 && !only_machines {
            return Err(AuthError::Discovery(format!(
                "{} does not offer PKCE with S256 (code_challenge_methods_supported): refused",
                shown_url(issuer)
            )));
        }
        for (endpoint, what) in [
            (&found.authorization_endpoint, "the authorization endpoint"),
            (&found.token_endpoint, "the token endpoint"),
            (&found.registration_endpoint, "the registration endpoint"),
        ] {
            if let Some(url) = endpoint {
                must_be_secure(url, what)?;
            }
        }
        return Ok(found);
    }
    Err(AuthError::Discovery(format!(
        "no metadata for the authorization server {} at {}",
        shown_url(issuer),
        urls.iter()
            .map(|u| shown_url(u))
            .collect::<Vec<_>>()
            .join(", ")
    )))
}

/// What the server at `server` publishes about its authorization now, as
/// one JSON document in canonical form (RFC 8785), for the history:
/// `{"resource_metadata": …, "authorization_server": …}`, its protected
/// resource metadata (from the URL its challenge named, else the
/// well-known ones) and the metadata of the first authorization server
/// that names (`null` when it names none, has none, or the document
/// describes another resource), each object as
/// served. Nothing is refused here that the flow would refuse (a foreign
/// `resource`, an issuer that does not match, no S256): the record shows
/// what changed, and the flow still refuses it when it authorizes.
pub async fn published(
    http: &Http,
    server: &str,
    named: Option<&str>,
) -> Result<Vec<u8>, AuthError> {
    use plumbline_base::json::{Object, Value};
    let urls = match named {
        Some(url) => vec![url.to_owned()],
        None => resource_metadata_urls(server)?,
    };
    let mut resource = None;
    for url in &urls {
        if let Some(found) = object(http, url, "protected resource metadata").await? {
            resource = Some(found);
            break;
        }
    }
    let Some(resource) = resource else {
        return Err(AuthError::Discovery(format!(
            "no protected resource metadata at {}",
            urls.iter()
                .map(|u| shown_url(u))
                .collect::<Vec<_>>()
                .join(" or ")
        )));
    };
    // A document about another resource is recorded, but the server it
    // names is not asked (no request to a host a foreign document chose).
    let about_this = resource
        .get("resource")
        .and_then(Value::as_str)
        .is_some_and(|r| resource_matches(r, server));
    let issuer = resource
        .get("authorization_servers")
        .and_then(Value::as_array)
        .and_then(<[Value]>::first)
        .and_then(Value::as_str)
        .filter(|_| about_this)
        .map(str::to_owned);
    let mut authorization_server = Value::Null;
    if let Some(issuer) = issuer {
        for url in server_metadata_urls(&issuer)? {
            if let Some(found) = object(http, &url, "authorization server metadata").await? {
                authorization_server = found;
                break;
            }
        }
    }
    let document = Value::Object(Object::from_members(vec![
        ("resource_metadata".into(), resource),
        ("authorization_server".into(), authorization_server),
    ]));
    plumbline_base::canonical::canonicalize_value(&document)
        .map_err(|e| AuthError::Discovery(format!("the authorization metadata: {e}")))
}

/// A JSON object at `url` ([`document`]'s rules), or an error naming it
/// when it is not one.
async fn object(
    http: &Http,
    url: &str,
    what: &str,
) -> Result<Option<plumbline_base::json::Value>, AuthError> {
    let Some(body) = body_of(http, url, what).await? else {
        return Ok(None);
    };
    match plumbline_base::json::parse(&body) {
        Ok(v) if v.as_object().is_some() => Ok(Some(v)),
        Ok(_) => Err(AuthError::Discovery(format!(
            "{what} at {} is not a JSON object",
            shown_url(url)
        ))),
        Err(e) => Err(AuthError::Discovery(format!(
            "{what} at {} is not readable: {e}",
            shown_url(url)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_https_or_this_machine_is_used() {
        assert!(secure("https://as.example/token"));
        assert!(secure("http://localhost:3000/x"));
        assert!(secure("http://127.0.0.1:9/x"));
        assert!(secure("http://[::1]:9/x"));
        assert!(!secure("http://as.example/token"));
        assert!(!secure("http://10.0.0.1/x"));
        assert!(!secure("file:///etc/passwd"));
        assert!(!secure("javascript:alert(1)"));
        assert!(!secure("not a url"));
    }

    #[test]
    fn resource_metadata_is_looked_for_at_the_path_then_the_root() {
        assert_eq!(
            resource_metadata_urls("http://localhost:3000/mcp").unwrap(),
            [
                "http://localhost:3000/.well-known/oauth-protected-resource/mcp",
                "http://localhost:3000/.well-known/oauth-protected-resource"
            ]
        );
        assert_eq!(
            resource_metadata_urls("https://a.example/").unwrap(),
            ["https://a.example/.well-known/oauth-protected-resource"]
        );
    }

    #[test]
    fn server_metadata_follows_the_mcp_order_and_never_the_root_for_a_path() {
        assert_eq!(
            server_metadata_urls("http://localhost:9/tenant1").unwrap(),
            [
                "http://localhost:9/.well-known/oauth-authorization-server/tenant1",
                "http://localhost:9/.well-known/openid-configuration/tenant1",
                "http://localhost:9/tenant1/.well-known/openid-configuration"
            ]
        );
        assert_eq!(
            server_metadata_urls("https://as.example").unwrap(),
            [
                "https://as.example/.well-known/oauth-authorization-server",
                "https://as.example/.well-known/openid-configuration"
            ]
        );
        assert!(server_metadata_urls("https://as.example/?x=1").is_err());
    }

    #[test]
    fn a_resource_must_be_the_server_or_a_prefix_of_it_on_its_origin() {
        let s = "http://localhost:3000/mcp";
        assert!(resource_matches("http://localhost:3000/mcp", s));
        assert!(resource_matches("http://localhost:3000", s));
        assert!(resource_matches("http://localhost:3000/", s));
        assert!(!resource_matches("http://localhost:3000/mc", s));
        assert!(!resource_matches("http://localhost:3000/mcp/v2", s));
        assert!(!resource_matches("https://evil.example.com/mcp", s));
        assert!(!resource_matches("http://localhost:3001/mcp", s));
        assert!(!resource_matches("not a url", s));
    }
}
