//! Where the user's own secrets live on this machine, read safely: SSH
//! private keys (`~/.ssh/id_*`), `~/.aws/credentials`, `~/.config/gcloud`,
//! `~/.netrc`, the `.env*` files of the client's working directory, and
//! the values of environment variables whose names say they are secrets.
//!
//! Each file is read bounded ([`MAX_FILE`]), only when it is a regular
//! file, and never through a symbolic link that leads out of the home
//! directory (or, for `.env*`, out of the working directory); one that is
//! absent or refused is skipped. The sources are looked at again when
//! asked ([`Sources::refresh`], at most every [`RECHECK`]), and their
//! fingerprints rebuilt when one changed. What is kept is fingerprints
//! ([`Fingerprints`]), never the secrets.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use super::fingerprints::Fingerprints;

/// The largest secret file read.
pub const MAX_FILE: u64 = 1 << 20;
/// The most files read under `~/.config/gcloud`.
const MAX_GCLOUD_FILES: usize = 64;
/// How often the sources are looked at again for changes.
pub const RECHECK: Duration = Duration::from_secs(2);

/// What the files looked like when last read: a change rebuilds.
type Stamp = Vec<(PathBuf, Option<(SystemTime, u64)>)>;

pub struct Sources {
    home: Option<PathBuf>,
    cwd: Option<PathBuf>,
    env: Vec<(String, String)>,
    stamp: Stamp,
    checked: Option<Instant>,
    /// Every source's fingerprints, each tagged with its index in
    /// `sources`.
    fingerprints: Fingerprints,
    /// The sources read, named for messages (`~/.ssh/id_ed25519`,
    /// `$GITHUB_TOKEN`).
    pub sources: Vec<String>,
}

impl Sources {
    /// The sources under `home` and `cwd`, and the secret-named variables
    /// of `env`; read now.
    pub fn new(
        home: Option<PathBuf>,
        cwd: Option<PathBuf>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Sources {
        let env = env
            .into_iter()
            .filter(|(k, v)| plumbline_base::redact::is_secret_name(k) && !v.trim().is_empty())
            .collect();
        let mut s = Sources {
            home,
            cwd,
            env,
            stamp: Vec::new(),
            checked: None,
            fingerprints: Fingerprints::new(),
            sources: Vec::new(),
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
        self.files()
            .into_iter()
            .map(|(p, _, _)| {
                let meta = std::fs::symlink_metadata(&p).ok();
                let stamp = meta.and_then(|m| Some((m.modified().ok()?, m.len())));
                (p, stamp)
            })
            .collect()
    }

    fn rebuild(&mut self) {
        self.stamp = self.stamp_now();
        let mut f = Fingerprints::new();
        let mut sources = Vec::new();
        let mut add = |name: String, pieces: Vec<String>, f: &mut Fingerprints| {
            let Ok(index) = u16::try_from(sources.len()) else {
                return;
            };
            let before = f.len();
            for piece in pieces {
                f.add(piece.as_bytes(), index);
            }
            if f.len() > before {
                sources.push(name);
            }
        };
        for (path, kind, within) in self.files() {
            let Some(text) = read_within(&path, within) else {
                continue;
            };
            add(self.shown(&path), kind.pieces(&text), &mut f);
        }
        for (name, value) in &self.env {
            add(format!("${name}"), vec![value.clone()], &mut f);
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
        self.fingerprints
            .found_in(text)
            .and_then(|i| self.sources.get(usize::from(i)))
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

/// `path`'s text, when it is a regular file of at most [`MAX_FILE`] bytes
/// that is, or whose links lead, within `within`.
pub fn read_within(path: &Path, within: &Path) -> Option<String> {
    let real = std::fs::canonicalize(path).ok()?;
    let root = std::fs::canonicalize(within).ok()?;
    if !real.starts_with(&root) {
        return None;
    }
    let meta = std::fs::metadata(&real).ok()?;
    if !meta.is_file() || meta.len() > MAX_FILE {
        return None;
    }
    let bytes = std::fs::read(&real).ok()?;
    if bytes.len() as u64 > MAX_FILE {
        return None;
    }
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    PrivateKey,
    Ini,
    Netrc,
    Json,
    DotEnv,
}

impl Kind {
    /// The secret pieces of a file's text.
    fn pieces(self, text: &str) -> Vec<String> {
        match self {
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
                            out.extend(Kind::PrivateKey.pieces(s));
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
        // Not secrets: a public key, ordinary settings, the home path.
        for benign in [
            "AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6",
            "development",
            "/home/alice",
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
}
