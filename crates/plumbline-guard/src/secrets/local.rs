//! Where the user's own secrets live on this machine, read safely: SSH
//! private keys (`~/.ssh/id_*`), `~/.aws/credentials`, `~/.config/gcloud`,
//! `~/.netrc`, the `.env*` files of the client's working directory, and
//! the values of environment variables whose names say they are secrets.
//!
//! Each file is read bounded ([`MAX_FILE`]: never more than that is read
//! into memory), only when it is a regular file (checked on the file
//! opened, which is opened without blocking, so a FIFO put in a key's
//! place cannot hang the guard), and never through a symbolic link that
//! leads out of the home directory (or, for `.env*`, out of the working
//! directory); one that is absent or refused is skipped. gcloud keeps its
//! tokens in SQLite files (`credentials.db`, `access_tokens.db`): their
//! token-like runs (24 or more bytes of a token's characters) are kept.
//! The sources are looked at again when asked ([`Sources::refresh`], at
//! most every [`RECHECK`]), a file and what its link leads to alike, and
//! their fingerprints rebuilt when one changed. What is kept is
//! fingerprints ([`Fingerprints`]), never the secrets: the variables'
//! values are fingerprinted once, when the guard starts, and dropped.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use super::fingerprints::Fingerprints;

/// The largest secret file read.
pub const MAX_FILE: u64 = 1 << 20;
/// The most files read under `~/.config/gcloud`.
const MAX_GCLOUD_FILES: usize = 64;
/// Variables whose names read as a secret's but are not: `PWD` is the
/// shell's working directory, not a password (taken for one, every call
/// naming a path under it was refused).
const NOT_SECRETS: &[&str] = &["PWD"];
/// How often the sources are looked at again for changes.
pub const RECHECK: Duration = Duration::from_secs(2);

/// What a file looked like when last read, itself and what a link leads
/// to: a change of either rebuilds.
type Stamp = Vec<(
    PathBuf,
    Option<(SystemTime, u64)>,
    Option<(SystemTime, u64)>,
)>;

pub struct Sources {
    home: Option<PathBuf>,
    cwd: Option<PathBuf>,
    stamp: Stamp,
    checked: Option<Instant>,
    /// The variables' fingerprints and the files', in one set read in one
    /// pass: a variable's tagged with its index in `variables`, a file's
    /// with its index in `sources` after those.
    fingerprints: Fingerprints,
    /// The secret-named variables' fingerprints (made once, the values
    /// dropped): what each rebuild starts from.
    env: Fingerprints,
    /// The files read, named for messages (`~/.ssh/id_ed25519`).
    pub sources: Vec<String>,
    /// The variables fingerprinted (`$GITHUB_TOKEN`).
    pub variables: Vec<String>,
}

impl Sources {
    /// The sources under `home` and `cwd`, and the secret-named variables
    /// of `env`; read now.
    pub fn new(
        home: Option<PathBuf>,
        cwd: Option<PathBuf>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Sources {
        let mut fingerprints = Fingerprints::new();
        let mut variables = Vec::new();
        for (name, value) in env {
            if NOT_SECRETS.contains(&name.as_str())
                || !plumbline_base::redact::is_secret_name(&name)
                || value.trim().is_empty()
            {
                continue;
            }
            let Ok(index) = u16::try_from(variables.len()) else {
                break;
            };
            if fingerprints.add(value.as_bytes(), index) {
                variables.push(format!("${name}"));
            }
        }
        let mut s = Sources {
            home,
            cwd,
            stamp: Vec::new(),
            checked: None,
            fingerprints: Fingerprints::new(),
            env: fingerprints,
            sources: Vec::new(),
            variables,
        };
        s.rebuild();
        s
    }

    /// Looks at the files again (at most every [`RECHECK`]) and rebuilds
    /// the fingerprints when one changed, appeared or went; whether it did.
    pub fn refresh(&mut self) -> bool {
        if self.checked.is_some_and(|at| at.elapsed() < RECHECK) {
            return false;
        }
        self.checked = Some(Instant::now());
        if self.stamp_now() == self.stamp {
            return false;
        }
        self.rebuild();
        true
    }

    fn files(&self) -> Vec<(PathBuf, Kind, &Path)> {
        let mut out = Vec::new();
        if let Some(home) = &self.home {
            if let Ok(dir) = std::fs::read_dir(home.join(".ssh")) {
                let mut keys: Vec<PathBuf> = dir
                    .flatten()
                    .map(|e| e.path())
                    .filter(|p| {
                        p.file_name()
                            .and_then(|n| n.to_str())
                            .is_some_and(|n| n.starts_with("id_") && !n.ends_with(".pub"))
                    })
                    .collect();
                keys.sort();
                out.extend(
                    keys.into_iter()
                        .map(|p| (p, Kind::PrivateKey, home.as_path())),
                );
            }
            out.push((home.join(".aws/credentials"), Kind::Ini, home.as_path()));
            out.push((home.join(".netrc"), Kind::Netrc, home.as_path()));
            let mut gcloud = Vec::new();
            walk_json(&home.join(".config/gcloud"), 3, &mut gcloud);
            gcloud.sort();
            gcloud.truncate(MAX_GCLOUD_FILES);
            out.extend(gcloud.into_iter().map(|p| (p, Kind::Json, home.as_path())));
            for db in ["credentials.db", "access_tokens.db"] {
                out.push((
                    home.join(".config/gcloud").join(db),
                    Kind::TokenStore,
                    home.as_path(),
                ));
            }
        }
        if let Some(cwd) = &self.cwd {
            if let Ok(dir) = std::fs::read_dir(cwd) {
                let mut envs: Vec<PathBuf> = dir
                    .flatten()
                    .map(|e| e.path())
                    .filter(|p| {
                        p.file_name()
                            .and_then(|n| n.to_str())
                            .is_some_and(|n| n == ".env" || n.starts_with(".env."))
                    })
                    .collect();
                envs.sort();
                out.extend(envs.into_iter().map(|p| (p, Kind::DotEnv, cwd.as_path())));
            }
        }
        out
    }

    fn stamp_now(&self) -> Stamp {
        let of = |m: std::io::Result<std::fs::Metadata>| {
            m.ok().and_then(|m| Some((m.modified().ok()?, m.len())))
        };
        self.files()
            .into_iter()
            .map(|(p, _, _)| {
                let (itself, target) =
                    (of(std::fs::symlink_metadata(&p)), of(std::fs::metadata(&p)));
                (p, itself, target)
            })
            .collect()
    }

    fn rebuild(&mut self) {
        self.stamp = self.stamp_now();
        let mut f = self.env.clone();
        let mut sources = Vec::new();
        let first = self.variables.len();
        let mut add = |name: String, pieces: Vec<String>, f: &mut Fingerprints| {
            let Ok(index) = u16::try_from(first + sources.len()) else {
                return;
            };
            let mut kept = false;
            for piece in pieces {
                kept |= f.add(piece.as_bytes(), index);
            }
            if kept {
                sources.push(name);
            }
        };
        for (path, kind, within) in self.files() {
            let Some(bytes) = read_within(&path, within) else {
                continue;
            };
            add(self.shown(&path), kind.pieces(&bytes), &mut f);
        }
        self.fingerprints = f;
        self.sources = sources;
    }

    /// A path as messages show it: `~/…` under the home directory.
    fn shown(&self, path: &Path) -> String {
        match self.home.as_ref().and_then(|h| path.strip_prefix(h).ok()) {
            Some(rest) => format!("~/{}", rest.display()),
            None => path.display().to_string(),
        }
    }

    /// The source holding a run of `text`, if any.
    pub fn found_in(&self, text: &[u8]) -> Option<&str> {
        self.source(self.fingerprints.found_in(text)?)
    }

    /// The shortest run of token bytes in which a piece can be found
    /// ([`Fingerprints::least_run`]).
    pub fn least_run(&self) -> usize {
        self.fingerprints.least_run()
    }

    /// [`Sources::found_in`], given the text's runs of token bytes
    /// ([`Fingerprints::found_in_runs`]).
    pub fn found_in_runs(&self, text: &[u8], long: &[std::ops::Range<usize>]) -> Option<&str> {
        self.source(self.fingerprints.found_in_runs(text, long)?)
    }

    fn source(&self, index: u16) -> Option<&str> {
        let i = usize::from(index);
        match i.checked_sub(self.variables.len()) {
            None => self.variables.get(i),
            Some(file) => self.sources.get(file),
        }
        .map(String::as_str)
    }
}

/// JSON files under `dir`, `depth` levels down, not through links.
fn walk_json(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let Ok(kind) = e.file_type() else { continue };
        let p = e.path();
        if kind.is_dir() && depth > 0 {
            walk_json(&p, depth - 1, out);
        } else if (kind.is_file() || kind.is_symlink())
            && p.extension().is_some_and(|x| x == "json")
        {
            out.push(p);
        }
        if out.len() > MAX_GCLOUD_FILES * 4 {
            return;
        }
    }
}

/// `path`'s bytes, when it is a regular file of at most [`MAX_FILE`]
/// bytes that is, or whose links lead, within `within`. Opened without
/// blocking (a FIFO opens at once) and checked on the file opened, so
/// what was checked is what is read; never more than [`MAX_FILE`] and a
/// byte is read, however the file grows meanwhile.
pub fn read_within(path: &Path, within: &Path) -> Option<Vec<u8>> {
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let real = std::fs::canonicalize(path).ok()?;
    let root = std::fs::canonicalize(within).ok()?;
    if !real.starts_with(&root) {
        return None;
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOFOLLOW)
        .open(&real)
        .ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.len() > MAX_FILE {
        return None;
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_FILE + 1).read_to_end(&mut bytes).ok()?;
    if bytes.len() as u64 > MAX_FILE {
        return None;
    }
    Some(bytes)
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    PrivateKey,
    Ini,
    Netrc,
    Json,
    DotEnv,
    /// A SQLite file of tokens (gcloud's): its token-like runs.
    TokenStore,
}

impl Kind {
    /// The secret pieces of a file's bytes.
    fn pieces(self, bytes: &[u8]) -> Vec<String> {
        if let Kind::TokenStore = self {
            // Runs of a token's characters at least a window long: the
            // tokens, never the table and column names (shorter) or
            // account names (an `@`).
            return bytes
                .split(|&b| !super::runs::token(b))
                .filter(|run| run.len() >= super::fingerprints::WINDOW)
                .map(|run| String::from_utf8_lossy(run).into_owned())
                .collect();
        }
        let text = String::from_utf8_lossy(bytes);
        let text = text.as_ref();
        match self {
            Kind::TokenStore => Vec::new(),
            // Only a private key: each line of its body.
            Kind::PrivateKey if text.contains("PRIVATE KEY") => text
                .lines()
                .map(str::trim)
                .filter(|l| !l.starts_with("-----") && !l.contains(':'))
                .map(str::to_owned)
                .collect(),
            Kind::PrivateKey => Vec::new(),
            // `name = value`: the values (access key ids, secrets, tokens).
            Kind::Ini => text
                .lines()
                .filter_map(|l| l.split_once('='))
                .filter(|(k, _)| {
                    !k.trim().starts_with('[') && !k.trim().eq_ignore_ascii_case("region")
                })
                .map(|(_, v)| v.trim().to_owned())
                .collect(),
            Kind::Netrc => {
                let words: Vec<&str> = text.split_whitespace().collect();
                words
                    .windows(2)
                    .filter(|w| matches!(w[0], "password" | "passwd" | "account"))
                    .map(|w| w[1].to_owned())
                    .collect()
            }
            Kind::Json => {
                let mut out = Vec::new();
                if let Ok(v) = serde_json::from_str::<serde_json::Value>(text) {
                    json_secrets(&v, &mut out);
                }
                out
            }
            Kind::DotEnv => text
                .lines()
                .filter_map(|l| {
                    let l = l.trim();
                    let l = l.strip_prefix("export ").unwrap_or(l);
                    let (k, v) = l.split_once('=')?;
                    let v = v.trim().trim_matches(|c| c == '"' || c == '\'');
                    if plumbline_base::redact::is_secret_name(k.trim()) {
                        return Some(v.to_owned());
                    }
                    // A URL's password (`postgres://user:PASS@host`).
                    let (_, rest) = v.split_once("://")?;
                    let (userinfo, _) = rest.split_once('@')?;
                    Some(userinfo.split_once(':')?.1.to_owned())
                })
                .collect(),
        }
    }
}

/// The string values of a credentials document's secret-named members
/// (`private_key`, `client_secret`, `refresh_token`, …), a private key by
/// its lines.
fn json_secrets(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, v) in m {
                match v {
                    serde_json::Value::String(s) if plumbline_base::redact::is_secret_name(k) => {
                        if s.contains("PRIVATE KEY") {
                            out.extend(Kind::PrivateKey.pieces(s.as_bytes()));
                        } else {
                            out.push(s.clone());
                        }
                    }
                    other => json_secrets(other, out),
                }
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|i| json_secrets(i, out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn a_home_s_secrets_are_found_by_their_pieces_and_links_out_of_it_are_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let cwd = dir.path().join("project");
        let outside = dir.path().join("elsewhere");
        let body = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW";
        write(
            &home.join(".ssh/id_ed25519"),
            &format!("-----BEGIN OPENSSH PRIVATE KEY-----\n{body}\nQyNTUxOQAAACCCOw9u1y2kQyNTUxOQAAACDh\n-----END OPENSSH PRIVATE KEY-----\n"),
        );
        write(
            &home.join(".ssh/id_ed25519.pub"),
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6 alice",
        );
        write(&home.join(".aws/credentials"), "[default]\naws_access_key_id = AKIAQ3EXJ7MPLWD5TZ2N\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLE\nregion = eu-west-1\n");
        write(
            &home.join(".netrc"),
            "machine api.example.com login alice password s3cr3t-netrc-pass\n",
        );
        write(
            &home.join(".config/gcloud/application_default_credentials.json"),
            r#"{"client_id":"764086051850.apps","client_secret":"d-FL95Q19q7MQmFpd7hHD0Ty","refresh_token":"1//0gLfWxLongRefreshTokenValue","type":"authorized_user"}"#,
        );
        write(&cwd.join(".env"), "NODE_ENV=development\nPORT=3000\nSTRIPE_SECRET_KEY=sk_test_51Hlocalenvsecretvalue\nDATABASE_URL=postgres://app:db-pass-1234567@localhost/app\n");
        write(&outside.join("key"), "-----BEGIN OPENSSH PRIVATE KEY-----\nOUTSIDEOUTSIDEOUTSIDEOUTSIDEOUTSIDE\n-----END OPENSSH PRIVATE KEY-----\n");
        std::os::unix::fs::symlink(outside.join("key"), home.join(".ssh/id_linked")).unwrap();
        let s = Sources::new(
            Some(home.clone()),
            Some(cwd.clone()),
            [
                (
                    "GITHUB_TOKEN".to_owned(),
                    "ghp_envtokenvalue12345".to_owned(),
                ),
                ("HOME".to_owned(), "/home/alice".to_owned()),
                ("PWD".to_owned(), "/home/alice/project".to_owned()),
            ],
        );
        let found = |t: &str| s.found_in(t.as_bytes()).map(str::to_owned);
        assert_eq!(
            found(&format!("x {} y", &body[5..40])).as_deref(),
            Some("~/.ssh/id_ed25519")
        );
        assert_eq!(
            found("wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLE").as_deref(),
            Some("~/.aws/credentials")
        );
        assert_eq!(found("use s3cr3t-netrc-pass").as_deref(), Some("~/.netrc"));
        assert!(found("1//0gLfWxLongRefreshTokenValue").is_some());
        assert!(found("sk_test_51Hlocalenvsecretvalue").is_some());
        assert!(found("db-pass-1234567").is_some());
        assert_eq!(
            found("ghp_envtokenvalue12345").as_deref(),
            Some("$GITHUB_TOKEN")
        );
        assert_eq!(s.variables, ["$GITHUB_TOKEN"]);
        // Not secrets: a public key, ordinary settings, the home path.
        for benign in [
            "AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6",
            "development",
            "/home/alice",
            "/home/alice/project/src/main.rs",
            "eu-west-1",
        ] {
            assert_eq!(found(benign), None, "{benign}");
        }
        // A link out of the home directory is not followed.
        assert_eq!(found("OUTSIDEOUTSIDEOUTSIDEOUTSIDE"), None);
        // A changed file is read again.
        let mut s = s;
        write(
            &home.join(".netrc"),
            "machine x login a password another-netrc-secret\n",
        );
        s.checked = None;
        assert!(s.refresh());
        assert!(s.found_in(b"another-netrc-secret").is_some());
        assert!(s.found_in(b"s3cr3t-netrc-pass").is_none());
        // Nothing at all is fine.
        let none = Sources::new(Some(dir.path().join("nobody")), None, []);
        assert!(none.sources.is_empty());
    }

    /// Issue 37, item 4: a file over the size bound, a FIFO in a key's
    /// place (which would block a plain open) and a directory are skipped
    /// at once; a key that is a link within the home is re-read when what
    /// it leads to changes; gcloud's SQLite token store gives its tokens,
    /// not its table or account names.
    #[test]
    fn odd_files_are_skipped_and_linked_keys_and_token_stores_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let big = format!(
            "machine m login a password {}\n",
            "too-big-netrc-password-".repeat(50_000)
        );
        assert!(big.len() as u64 > MAX_FILE);
        write(&home.join(".netrc"), &big);
        std::fs::create_dir_all(home.join(".ssh/id_dir")).unwrap();
        nix::unistd::mkfifo(
            &home.join(".ssh/id_fifo"),
            nix::sys::stat::Mode::S_IRUSR | nix::sys::stat::Mode::S_IWUSR,
        )
        .unwrap();
        let real = home.join("keys/current");
        write(
            &real,
            "-----BEGIN OPENSSH PRIVATE KEY-----\nFIRSTKEYFIRSTKEYFIRSTKEYFIRSTKEY\n-----END OPENSSH PRIVATE KEY-----\n",
        );
        std::os::unix::fs::symlink(&real, home.join(".ssh/id_rsa")).unwrap();
        {
            std::fs::create_dir_all(home.join(".config/gcloud")).unwrap();
            let db =
                rusqlite::Connection::open(home.join(".config/gcloud/credentials.db")).unwrap();
            db.execute_batch(
                "CREATE TABLE credentials (account_id TEXT PRIMARY KEY, value BLOB);
                 INSERT INTO credentials VALUES ('alice@example.com',
                     '{\"client_id\": \"32555940559.apps\", \"refresh_token\": \"1//0gSqliteStoredRefreshTokenValue\", \"type\": \"authorized_user\"}');",
            )
            .unwrap();
        }
        let started = Instant::now();
        let mut s = Sources::new(Some(home.clone()), None, []);
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "blocked on the FIFO"
        );
        assert!(s.found_in(b"too-big-netrc-password-too-big").is_none());
        assert!(s.found_in(b"FIRSTKEYFIRSTKEYFIRSTKEYFIRSTKEY").is_some());
        assert_eq!(
            s.found_in(b"use 1//0gSqliteStoredRefreshTokenValue now"),
            Some("~/.config/gcloud/credentials.db")
        );
        for benign in [
            "alice@example.com",
            "account_id TEXT PRIMARY KEY",
            "authorized_user",
        ] {
            assert!(s.found_in(benign.as_bytes()).is_none(), "{benign}");
        }
        // The key the link leads to is replaced: read again.
        write(
            &real,
            "-----BEGIN OPENSSH PRIVATE KEY-----\nSECONDKEYSECONDKEYSECONDKEYSECOND\n-----END OPENSSH PRIVATE KEY-----\n",
        );
        s.checked = None;
        assert!(s.refresh());
        assert!(s.found_in(b"SECONDKEYSECONDKEYSECONDKEYSECOND").is_some());
        assert!(s.found_in(b"FIRSTKEYFIRSTKEYFIRSTKEYFIRSTKEY").is_none());
    }
}
