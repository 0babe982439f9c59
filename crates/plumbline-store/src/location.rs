//! Where a history is kept: a store location, as `--store` and
//! `PLUMBLINE_STORE` give it. A file path, or `sqlite:PATH`
//! (`sqlite:///abs/path` too), is the embedded SQLite store; a
//! `postgres://` or `postgresql://` URL is a PostgreSQL database
//! ([`PostgresLocation`]).

use std::path::PathBuf;

use crate::{PostgresLocation, StoreError};

/// A parsed store location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// The embedded SQLite store in this file.
    Sqlite(PathBuf),
    /// A PostgreSQL database.
    Postgres(PostgresLocation),
}

impl Location {
    /// Parses a store location: `sqlite:PATH`, `sqlite://PATH` or a plain
    /// path is SQLite; `postgres://` and `postgresql://` are PostgreSQL;
    /// any other `SCHEME://` is refused, as is a libpq connection string.
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
                reason:
                    "write it as a URL: postgres://USER:${PASSWORD_VARIABLE}@HOST:PORT/DATABASE"
                        .to_owned(),
            });
        }
        // `postgres:` or `postgresql:` without `//` is a mistyped URL, not
        // a file named after a password.
        let lowered = text.to_ascii_lowercase();
        if (lowered.starts_with("postgres:") || lowered.starts_with("postgresql:"))
            && !text.contains("://")
        {
            return Err(StoreError::Location {
                location: "(a PostgreSQL URL without //)".to_owned(),
                reason: "write it as postgres://USER:${PASSWORD_VARIABLE}@HOST:PORT/DATABASE"
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
                return Ok(Location::Postgres(PostgresLocation::new(text)));
            }
            if is_scheme {
                return Err(refuse(format!(
                    "`{scheme}://` is not a store location plumbline knows; use a file path, \
                     sqlite:PATH or postgres://…"
                )));
            }
        }
        Ok(Location::Sqlite(PathBuf::from(text)))
    }

    /// What messages show: the file, or the URL without user
    /// information and query.
    pub fn display(&self) -> String {
        match self {
            Location::Sqlite(path) => path.display().to_string(),
            Location::Postgres(url) => url.redacted(),
        }
    }

    /// The SQLite file of this location; `None` for a database server.
    pub fn sqlite_path(&self) -> Option<&std::path::Path> {
        match self {
            Location::Sqlite(path) => Some(path),
            Location::Postgres(_) => None,
        }
    }
}

impl From<PathBuf> for Location {
    fn from(path: PathBuf) -> Location {
        Location::Sqlite(path)
    }
}

impl From<&std::path::Path> for Location {
    fn from(path: &std::path::Path) -> Location {
        Location::Sqlite(path.to_path_buf())
    }
}

impl From<&PathBuf> for Location {
    fn from(path: &PathBuf) -> Location {
        Location::Sqlite(path.clone())
    }
}

impl From<&Location> for Location {
    fn from(location: &Location) -> Location {
        location.clone()
    }
}

/// `text` without what may hold a password: a URL's user information
/// (everything up to its last `@`: a password may hold `/`, `?` or `@`)
/// and its query (`?password=…`): `scheme://…@host/db?…`. A location is
/// shown in errors and logs, a password never.
pub(crate) fn redacted(text: &str) -> String {
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
        Location::parse(text)
            .unwrap()
            .sqlite_path()
            .expect("sqlite")
            .to_path_buf()
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
    fn postgresql_urls_are_databases_not_files() {
        for url in [
            "postgres://plumbline@127.0.0.1/history",
            "postgresql://u:${PW}@db.internal:5432/p?sslmode=require",
            "POSTGRES://h/db",
        ] {
            let at = Location::parse(url).unwrap();
            assert!(matches!(at, Location::Postgres(_)), "{url}");
            assert!(at.sqlite_path().is_none());
        }
        assert_eq!(
            Location::parse("postgresql://u:${PW}@db.internal:5432/p?sslmode=require")
                .unwrap()
                .display(),
            "postgresql://…@db.internal:5432/p?…"
        );
    }

    #[test]
    fn what_is_not_a_location_is_refused_without_its_password() {
        // The message never repeats a password, wherever a connection
        // string or an unknown scheme puts it.
        for (location, shown) in [
            (
                "mysql://team:s3cret@127.0.0.1:5432/h",
                "mysql://…@127.0.0.1:5432/h",
            ),
            ("redis://u:pa/s3cret@h/db", "redis://…@h/db"),
            ("mongodb://u:a@s3cret@h/db", "mongodb://…@h/db"),
            ("mysql:///db?password=s3cret", "mysql:///db?…"),
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
        for typo in ["postgres:/team:s3cret@db/h", "PostgreSQL:team:s3cret@db/h"] {
            let e = Location::parse(typo).unwrap_err().to_string();
            assert!(!e.contains("s3cret"), "{e}");
            assert!(e.contains("postgres://USER"), "{e}");
        }
        assert!(Location::parse("sqlite:").is_err());
    }
}
