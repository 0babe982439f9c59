//! `plumbline.toml`: the servers Plumbline watches.
//!
//! ```toml
//! [servers.github]
//! transport = "stdio"
//! command = "npx"
//! args = ["-y", "@modelcontextprotocol/server-github"]
//! env = { GITHUB_PERSONAL_ACCESS_TOKEN = "${GITHUB_TOKEN}" }
//!
//! [servers.docs]
//! transport = "http"            # Streamable HTTP; "sse" for legacy HTTP+SSE
//! url = "https://mcp.example.com/mcp"
//! headers = { Authorization = "Bearer ${DOCS_TOKEN}" }
//! ```
//!
//! Header and environment values may name environment variables as
//! `${NAME}`; they are expanded only when connecting, so secrets never sit
//! in the file, the store or a log. A server's *identity* (what the store
//! records) is its transport and command or URL, never those values.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _, Result};
use plumbline_mcp::{HttpSpec, ServerSpec, StdioSpec};
use serde::{Deserialize, Serialize};

/// The file as written.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub servers: BTreeMap<String, ServerConfig>,
}

/// One server, by transport.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(tag = "transport", rename_all = "lowercase", deny_unknown_fields)]
pub enum ServerConfig {
    Stdio {
        command: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        args: Vec<String>,
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        env: BTreeMap<String, String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cwd: Option<PathBuf>,
    },
    Http {
        url: String,
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        headers: BTreeMap<String, String>,
    },
    Sse {
        url: String,
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        headers: BTreeMap<String, String>,
    },
}

impl Config {
    pub fn load(path: &Path) -> Result<Config> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let config: Config =
            toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        for name in config.servers.keys() {
            check_name(name).with_context(|| format!("{}", path.display()))?;
        }
        Ok(config)
    }

    /// The servers named in `only` (all when empty), in name order; an
    /// unknown name is an error.
    pub fn select(&self, only: &[String]) -> Result<Vec<(&str, &ServerConfig)>> {
        if only.is_empty() {
            return Ok(self.servers.iter().map(|(k, v)| (k.as_str(), v)).collect());
        }
        only.iter()
            .map(|name| {
                self.servers
                    .get_key_value(name)
                    .map(|(k, v)| (k.as_str(), v))
                    .ok_or_else(|| anyhow::anyhow!("no server named {name:?} in the configuration"))
            })
            .collect()
    }
}

fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 100
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !ok {
        bail!("server name {name:?}: use letters, digits, '-', '_' and '.' (at most 100)");
    }
    Ok(())
}

/// Expands `${NAME}` from `lookup`; `$$` is a literal `$`. An unset name is
/// an error naming it (never its value).
pub fn expand(value: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        if let Some(after) = rest.strip_prefix("$$") {
            out.push('$');
            rest = after;
        } else if let Some(after) = rest.strip_prefix("${") {
            let Some(end) = after.find('}') else {
                bail!("unterminated ${{ in a configured value");
            };
            let name = &after[..end];
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                bail!("invalid variable name {name:?} in a configured value");
            }
            match lookup(name) {
                Some(v) => out.push_str(&v),
                None => bail!("environment variable {name} is not set"),
            }
            rest = &after[end + 1..];
        } else {
            out.push('$');
            rest = &rest[1..];
        }
    }
    out.push_str(rest);
    Ok(out)
}

fn env_lookup(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

impl ServerConfig {
    /// What the store records about the server: no secret values.
    pub fn identity(&self) -> serde_json::Value {
        match self {
            ServerConfig::Stdio {
                command,
                args,
                cwd,
                env,
            } => serde_json::json!({
                "transport": "stdio",
                "command": command,
                "args": args,
                "cwd": cwd,
                "env": env.keys().collect::<Vec<_>>(),
            }),
            ServerConfig::Http { url, headers } => serde_json::json!({
                "transport": "http", "url": url, "headers": headers.keys().collect::<Vec<_>>(),
            }),
            ServerConfig::Sse { url, headers } => serde_json::json!({
                "transport": "sse", "url": url, "headers": headers.keys().collect::<Vec<_>>(),
            }),
        }
    }

    /// What to connect to, with `${NAME}` expanded from the environment.
    pub fn spec(&self) -> Result<ServerSpec> {
        self.spec_with(&env_lookup)
    }

    pub fn spec_with(&self, lookup: &dyn Fn(&str) -> Option<String>) -> Result<ServerSpec> {
        let pairs = |m: &BTreeMap<String, String>, what: &str| -> Result<Vec<(String, String)>> {
            m.iter()
                .map(|(k, v)| {
                    Ok((
                        k.clone(),
                        expand(v, lookup).with_context(|| format!("{what} {k}"))?,
                    ))
                })
                .collect()
        };
        Ok(match self {
            ServerConfig::Stdio {
                command,
                args,
                env,
                cwd,
            } => ServerSpec::Stdio(StdioSpec {
                command: command.clone(),
                args: args.clone(),
                env: pairs(env, "environment variable")?,
                cwd: cwd.clone(),
            }),
            ServerConfig::Http { url, headers } => ServerSpec::Http(HttpSpec {
                url: url.clone(),
                headers: pairs(headers, "header")?,
            }),
            ServerConfig::Sse { url, headers } => ServerSpec::Sse(HttpSpec {
                url: url.clone(),
                headers: pairs(headers, "header")?,
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_transport() {
        let c: Config = toml::from_str(
            r#"
            [servers.local]
            transport = "stdio"
            command = "npx"
            args = ["-y", "pkg"]
            env = { TOKEN = "${GH}" }

            [servers.remote]
            transport = "http"
            url = "http://127.0.0.1:9/mcp"
            headers = { Authorization = "Bearer ${TOKEN}" }

            [servers.old]
            transport = "sse"
            url = "http://127.0.0.1:9/sse"
            "#,
        )
        .unwrap();
        assert_eq!(c.servers.len(), 3);
        let lookup = |n: &str| (n == "TOKEN" || n == "GH").then(|| "s3cret".to_owned());
        match c.servers["remote"].spec_with(&lookup).unwrap() {
            ServerSpec::Http(h) => assert_eq!(
                h.headers,
                [("Authorization".into(), "Bearer s3cret".into())]
            ),
            other => panic!("{other:?}"),
        }
        // The identity names the variables, never their values.
        let id = c.servers["local"].identity().to_string();
        assert!(
            id.contains("TOKEN") && !id.contains("s3cret") && !id.contains("${GH}"),
            "{id}"
        );
    }

    #[test]
    fn unknown_fields_and_transports_are_errors() {
        assert!(toml::from_str::<Config>("[servers.a]\ntransport = \"ftp\"\nurl = \"x\"").is_err());
        assert!(toml::from_str::<Config>(
            "[servers.a]\ntransport = \"http\"\nurl = \"x\"\nheader = {}"
        )
        .is_err());
    }

    #[test]
    fn expansion() {
        let lookup = |n: &str| (n == "A").then(|| "1".to_owned());
        assert_eq!(expand("x${A}y$$z$", &lookup).unwrap(), "x1y$z$");
        let err = expand("${MISSING}", &lookup).unwrap_err().to_string();
        assert_eq!(err, "environment variable MISSING is not set");
        assert!(expand("${A", &lookup).is_err());
    }
}
