//! Tokens kept between runs: one JSON file readable only by its owner
//! (mode 0600, in a directory of mode 0700), by default
//! `$XDG_CONFIG_HOME/plumbline/tokens.json` (else `~/.config/…`);
//! `PLUMBLINE_TOKENS` names another. One entry per server URL: the
//! authorization server it is registered at, its client (and secret, for
//! a dynamically registered confidential client), its tokens. Written
//! whole to a temporary file of mode 0600 and renamed over the old one,
//! so a reader never sees half a file and no moment exists where the
//! tokens are readable by others.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::AuthError;

/// What is kept for one server.
#[derive(Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Kept {
    pub issuer: String,
    pub client_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    /// `client_secret_basic`, `client_secret_post`, `none`, `private_key_jwt`.
    pub method: String,
    pub access_token: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    /// Unix seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    #[serde(default)]
    pub scopes: Vec<String>,
    /// The resource the tokens are for (RFC 8707).
    pub resource: String,
    /// Where the server's challenge said its protected resource metadata
    /// is, when it named a place: read there again later, when there is
    /// no challenge to say so (the record of what it publishes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_metadata_url: Option<String>,
}

impl std::fmt::Debug for Kept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kept")
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field("method", &self.method)
            .field("expires_at", &self.expires_at)
            .field("scopes", &self.scopes)
            .field("resource", &self.resource)
            .finish_non_exhaustive()
    }
}

#[derive(Default, Serialize, Deserialize)]
struct File {
    #[serde(default)]
    servers: BTreeMap<String, Kept>,
}

/// The token file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenFile {
    path: PathBuf,
}

/// The most bytes the token file may have.
const MAX_BYTES: u64 = 4 << 20;

impl TokenFile {
    pub fn at(path: PathBuf) -> TokenFile {
        TokenFile { path }
    }

    /// `PLUMBLINE_TOKENS`, else the user's configuration directory.
    pub fn default_location(env: &dyn Fn(&str) -> Option<String>) -> Option<TokenFile> {
        if let Some(p) = env("PLUMBLINE_TOKENS").filter(|p| !p.is_empty()) {
            return Some(TokenFile::at(PathBuf::from(p)));
        }
        let base = env("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| env("HOME").map(|h| Path::new(&h).join(".config")))?;
        Some(TokenFile::at(base.join("plumbline").join("tokens.json")))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn read(&self) -> Result<File, AuthError> {
        let fail = |what: String| {
            AuthError::Configuration(format!("token file {}: {what}", self.path.display()))
        };
        let meta = match std::fs::metadata(&self.path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(File::default()),
            Err(e) => return Err(fail(e.to_string())),
        };
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = meta.permissions().mode();
            if mode & 0o077 != 0 {
                return Err(fail(format!(
                    "can be read by others (mode {:o}): not used; chmod 600 it or log in again",
                    mode & 0o777
                )));
            }
        }
        // Bounded, a regular file only, and never quoted: it holds tokens.
        let text = plumbline_base::file::read_file(&self.path, MAX_BYTES)
            .map_err(|e| AuthError::Configuration(format!("token file: {e:#}")))?;
        serde_json::from_str(&text).map_err(|e| fail(format!("unreadable at line {}", e.line())))
    }

    /// What is kept for `server`.
    pub fn get(&self, server: &str) -> Result<Option<Kept>, AuthError> {
        Ok(self.read()?.servers.remove(server))
    }

    /// Keeps `kept` for `server` (or forgets it, with `None`); returns
    /// whether something was there before.
    pub fn put(&self, server: &str, kept: Option<Kept>) -> Result<bool, AuthError> {
        self.update(server, |_| kept)
    }

    /// Replaces what is kept for `server` with what `change` makes of it,
    /// read, changed and written under a lock (one process and another:
    /// servers observed at once share the file); returns whether
    /// something was there before. A file that cannot be read (others
    /// could read it, or it is not JSON) is replaced, with mode 0600.
    pub fn update(
        &self,
        server: &str,
        change: impl FnOnce(Option<&Kept>) -> Option<Kept>,
    ) -> Result<bool, AuthError> {
        let fail = |what: String| {
            AuthError::Configuration(format!("token file {}: {what}", self.path.display()))
        };
        let dir = self.path.parent().unwrap_or(Path::new("."));
        create_private_dir(dir).map_err(|e| fail(e.to_string()))?;
        let _held = self.lock().map_err(|e| fail(format!("locking: {e}")))?;
        let mut file = self.read().unwrap_or_default();
        let before = file.servers.get(server).cloned();
        let had = before.is_some();
        match change(before.as_ref()) {
            Some(k) => {
                file.servers.insert(server.to_owned(), k);
            }
            None => {
                file.servers.remove(server);
            }
        }
        let text = serde_json::to_vec_pretty(&file).map_err(|e| fail(e.to_string()))?;
        // A name of its own per write: writers of one process (servers
        // observed at once) never share a temporary file.
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let temp = dir.join(format!(
            ".{}.{}.{}.tmp",
            self.path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("tokens"),
            std::process::id(),
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let mut out = options.open(&temp).map_err(|e| fail(e.to_string()))?;
        out.write_all(&text)
            .and_then(|()| out.sync_all())
            .map_err(|e| fail(e.to_string()))?;
        std::fs::rename(&temp, &self.path).map_err(|e| {
            let _ = std::fs::remove_file(&temp);
            fail(e.to_string())
        })?;
        Ok(had)
    }
}

impl TokenFile {
    /// An exclusive lock on `PATH.lock` (created 0600), held while the
    /// returned file is open.
    fn lock(&self) -> std::io::Result<std::fs::File> {
        let mut name = self.path.clone().into_os_string();
        name.push(".lock");
        let mut options = std::fs::OpenOptions::new();
        options.read(true).write(true).create(true).truncate(false);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let file = options.open(PathBuf::from(name))?;
        file.lock()?;
        Ok(file)
    }
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    if dir.exists() {
        return Ok(());
    }
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(token: &str) -> Kept {
        Kept {
            issuer: "http://as".into(),
            client_id: "c".into(),
            method: "none".into(),
            access_token: token.into(),
            resource: "http://rs/mcp".into(),
            ..Kept::default()
        }
    }

    #[test]
    fn entries_are_kept_per_server_in_an_owner_only_file() {
        let dir = std::env::temp_dir().join(format!("plumbline-tokens-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let file = TokenFile::at(dir.join("sub/tokens.json"));
        assert_eq!(file.get("http://rs/mcp").unwrap(), None);
        assert!(!file.put("http://rs/mcp", Some(kept("t1"))).unwrap());
        assert!(file.put("http://rs/mcp", Some(kept("t2"))).unwrap());
        file.put("http://other/mcp", Some(kept("t3"))).unwrap();
        assert_eq!(
            file.get("http://rs/mcp").unwrap().unwrap().access_token,
            "t2"
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(file.path()), 0o600);
            assert_eq!(mode(&dir.join("sub")), 0o700);
            // Loosened by someone: refused, and its text not shown.
            std::fs::set_permissions(file.path(), std::fs::Permissions::from_mode(0o644)).unwrap();
            let e = file.get("http://rs/mcp").unwrap_err().to_string();
            assert!(e.contains("chmod 600") && !e.contains("t2"), "{e}");
            std::fs::set_permissions(file.path(), std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        assert!(file.put("http://rs/mcp", None).unwrap());
        assert_eq!(file.get("http://rs/mcp").unwrap(), None);
        assert!(file.get("http://other/mcp").unwrap().is_some());
        std::fs::write(file.path(), "{not json t3").unwrap();
        let e = file.get("http://other/mcp").unwrap_err().to_string();
        assert!(!e.contains("t3"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_default_location_is_the_users_config_directory() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |n: &str| {
                vars.iter()
                    .find(|(k, _)| *k == n)
                    .map(|(_, v)| v.to_string())
            }
        };
        let at = |vars| TokenFile::default_location(&env(vars)).map(|f| f.path().to_owned());
        assert_eq!(
            at(&[("HOME", "/h")]),
            Some(PathBuf::from("/h/.config/plumbline/tokens.json"))
        );
        assert_eq!(
            at(&[("HOME", "/h"), ("XDG_CONFIG_HOME", "/x")]),
            Some(PathBuf::from("/x/plumbline/tokens.json"))
        );
        assert_eq!(
            at(&[("HOME", "/h"), ("XDG_CONFIG_HOME", "rel")]),
            Some(PathBuf::from("/h/.config/plumbline/tokens.json"))
        );
        assert_eq!(
            at(&[("PLUMBLINE_TOKENS", "/t.json")]),
            Some(PathBuf::from("/t.json"))
        );
        assert_eq!(at(&[]), None);
    }
}
