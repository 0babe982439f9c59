//! Where a history is kept: a store location, as `--store` and
//! `PLUMBLINE_STORE` give it. A file path, or `sqlite:PATH`
//! (`sqlite:///abs/path` too), is the embedded SQLite store. A
//! PostgreSQL URL is recognised and refused with a message that says so,
//! rather than read as a file name: no PostgreSQL backend is built yet.

use std::path::PathBuf;

use crate::StoreError;

/// A parsed store location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// The embedded SQLite store in this file.
    Sqlite(PathBuf),
}

impl Location {
    /// Parses a store location: `sqlite:PATH`, `sqlite://PATH` or a plain
    /// path is SQLite; `postgres://` and `postgresql://` are refused, as is
    /// any other `SCHEME://`.
    pub fn parse(text: &str) -> Result<Location, StoreError> {
        let refuse = |reason: String| StoreError::Location {
            location: redacted(text),
            reason,
        };
        if text.is_empty() {
            return Err(refuse("it is empty".to_owned()));
        }
        // A libpq connection string (`host=… password=…`) is not a file
        // name: say so without repeating any of it.
        if text.split_whitespace().any(|pair| {
            pair.split_once('=').is_some_and(|(key, _)| {
                matches!(
                    key,
                    "host" | "hostaddr" | "port" | "dbname" | "user" | "password" | "sslmode"
                )
            })
        }) {
            return Err(StoreError::Location {
                location: "(a PostgreSQL connection string)".to_owned(),
                reason: "PostgreSQL stores are not supported by this build of plumbline yet; \
                         use a file path or sqlite:PATH"
                    .to_owned(),
            });
        }
        let sqlite = text
            .get(..7)
            .filter(|scheme| scheme.eq_ignore_ascii_case("sqlite:"))
            .map(|_| &text[7..]);
        let path = match sqlite {
            Some(rest) => rest.strip_prefix("//").unwrap_or(rest),
            None => text,
        };
        if path.is_empty() {
            return Err(refuse("`sqlite:` names no file".to_owned()));
        }
        // SQLite's name for a database kept in memory: a history that
        // keeps nothing would pass every read as empty.
        if path == ":memory:" || path.starts_with("file::memory:") {
            return Err(refuse("an in-memory store keeps nothing".to_owned()));
        }
        if sqlite.is_some() {
            return Ok(Location::Sqlite(PathBuf::from(path)));
        }
        if let Some((scheme, _)) = text.split_once("://") {
            let lowered = scheme.to_ascii_lowercase();
            let is_scheme = !scheme.is_empty()
                && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
            if matches!(lowered.as_str(), "postgres" | "postgresql") {
                return Err(refuse(
                    "PostgreSQL stores are not supported by this build of plumbline yet; \
                     use a file path or sqlite:PATH"
                        .to_owned(),
                ));
            }
            if is_scheme {
                return Err(refuse(format!(
                    "`{scheme}://` is not a store location plumbline knows; use a file path \
                     or sqlite:PATH"
                )));
            }
        }
        Ok(Location::Sqlite(PathBuf::from(text)))
    }

    /// The SQLite file of this location.
    pub fn into_sqlite_path(self) -> PathBuf {
        match self {
            Location::Sqlite(path) => path,
        }
    }
}

/// `text` without what may hold a password: a URL's user information
/// (everything up to its last `@`: a password may hold `/`, `?` or `@`)
/// and its query (`?password=…`): `scheme://…@host/db?…`. A location is
/// shown in errors and logs, a password never.
fn redacted(text: &str) -> String {
    let Some((scheme, rest)) = text.split_once("://") else {
        return text.to_owned();
    };
    let (user, rest) = match rest.rsplit_once('@') {
        Some((_, host)) => ("…@", host),
        None => ("", rest),
    };
    let (rest, query) = match rest.split_once('?') {
        Some((before, _)) => (before, "?…"),
        None => (rest, ""),
    };
    format!("{scheme}://{user}{rest}{query}")
}

impl std::str::FromStr for Location {
    type Err = StoreError;

    fn from_str(text: &str) -> Result<Location, StoreError> {
        Location::parse(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sqlite(text: &str) -> PathBuf {
        Location::parse(text).unwrap().into_sqlite_path()
    }

    #[test]
    fn paths_and_sqlite_urls_are_sqlite_files() {
        assert_eq!(sqlite("plumbline.db"), PathBuf::from("plumbline.db"));
        assert_eq!(sqlite("/var/lib/p.db"), PathBuf::from("/var/lib/p.db"));
        assert_eq!(sqlite("sqlite:team.db"), PathBuf::from("team.db"));
        assert_eq!(sqlite("sqlite:///srv/p.db"), PathBuf::from("/srv/p.db"));
        assert_eq!(sqlite("sqlite://p.db"), PathBuf::from("p.db"));
        assert_eq!(sqlite("SQLite:///x.db"), PathBuf::from("/x.db"));
        // A colon in a file name is not a scheme without `//`.
        assert_eq!(sqlite("backup:2026.db"), PathBuf::from("backup:2026.db"));
    }

    #[test]
    fn postgresql_urls_are_refused_not_made_into_files() {
        for url in [
            "postgres://plumbline@127.0.0.1/history",
            "postgresql://u:${PW}@db.internal:5432/p?sslmode=require",
            "POSTGRES://h/db",
        ] {
            let e = Location::parse(url).unwrap_err().to_string();
            assert!(e.contains("PostgreSQL stores are not supported"), "{e}");
        }
        // The message never repeats a password, wherever the URL or a
        // connection string puts it.
        for (location, shown) in [
            (
                "postgres://team:s3cret@127.0.0.1:5432/h",
                "postgres://…@127.0.0.1:5432/h",
            ),
            ("postgres://u:pa/s3cret@h/db", "postgres://…@h/db"),
            ("postgres://u:a@s3cret@h/db", "postgres://…@h/db"),
            ("postgresql:///db?password=s3cret", "postgresql:///db?…"),
            (
                "host=127.0.0.1 dbname=h password=s3cret",
                "(a PostgreSQL connection string)",
            ),
        ] {
            let e = Location::parse(location).unwrap_err().to_string();
            assert!(!e.contains("s3cret"), "{e}");
            assert!(e.contains(shown), "{e}");
        }
        // In memory, a history keeps nothing.
        assert!(Location::parse("sqlite::memory:").is_err());
        assert!(Location::parse(":memory:").is_err());
        let e = Location::parse("mysql://h/db").unwrap_err().to_string();
        assert!(e.contains("`mysql://` is not a store location"), "{e}");
        assert!(Location::parse("").is_err());
        assert!(Location::parse("sqlite:").is_err());
    }
}
