//! A PostgreSQL store location: the URL as given, its password possibly
//! `${VAR}`, turned into a connection only when connecting.

use std::sync::Arc;

use crate::StoreError;

use super::{Connector, CONNECT_TIMEOUT};

/// A `postgres://` or `postgresql://` URL, kept as given (a `${VAR}` in it
/// is read when connecting, so the secret is in memory only then).
#[derive(Clone, PartialEq, Eq)]
pub struct PostgresLocation {
    url: String,
}

impl std::fmt::Debug for PostgresLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("PostgresLocation")
            .field(&self.redacted())
            .finish()
    }
}

impl PostgresLocation {
    /// `url` (its scheme already checked by [`crate::Location::parse`]).
    pub(crate) fn new(url: &str) -> PostgresLocation {
        PostgresLocation {
            url: url.to_owned(),
        }
    }

    /// The URL without its user information and query: what messages show.
    pub fn redacted(&self) -> String {
        crate::location::redacted(&self.url)
    }

    fn refuse(&self, reason: impl Into<String>) -> StoreError {
        StoreError::Location {
            location: self.redacted(),
            reason: reason.into(),
        }
    }

    /// The URL with each `${VAR}` replaced by that variable's value.
    fn expanded(&self, env: impl Fn(&str) -> Option<String>) -> Result<String, StoreError> {
        let mut out = String::with_capacity(self.url.len());
        let mut rest = self.url.as_str();
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let Some(end) = after.find('}') else {
                return Err(self.refuse("a `${` in it is not closed by `}`"));
            };
            let name = &after[..end];
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(self.refuse(format!("`${{{name}}}` is not a variable name")));
            }
            let value = env(name).ok_or_else(|| {
                self.refuse(format!(
                    "the environment variable {name} it names is not set"
                ))
            })?;
            // A value goes into the URL as itself: percent-encode what
            // would end the user information or the host.
            out.push_str(&percent_encode(&value));
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }

    /// How to connect: the driver's configuration (the password read from
    /// the environment) and TLS when `sslmode` asks for it.
    pub(crate) fn connector(&self) -> Result<Connector, StoreError> {
        self.connector_from(|name| std::env::var(name).ok())
    }

    fn connector_from(
        &self,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Connector, StoreError> {
        let url = self.expanded(env)?;
        // Options the driver does not read: the CA file is ours, and
        // libpq's verifying modes are what `require` does here anyway.
        let (base, query) = match url.split_once('?') {
            Some((base, query)) => (base, query),
            None => (url.as_str(), ""),
        };
        let mut root_file = None;
        let mut kept = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            match pair.split_once('=') {
                Some(("sslrootcert", file)) => root_file = Some(percent_decode(file)),
                Some(("sslmode", "verify-full" | "verify-ca")) => kept.push("sslmode=require"),
                _ => kept.push(pair),
            }
        }
        let url = if kept.is_empty() {
            base.to_owned()
        } else {
            format!("{base}?{}", kept.join("&"))
        };
        let mut config: postgres::Config = url.parse().map_err(|e: postgres::Error| {
            self.refuse(format!("it is not a PostgreSQL URL: {e}"))
        })?;
        if config.get_application_name().is_none() {
            config.application_name("plumbline");
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        // A connection whose peer vanished (a partition, a host gone) is
        // given up within a minute rather than the kernel's quarter of an
        // hour: a store call never blocks its caller longer.
        if config.get_tcp_user_timeout().is_none() {
            config.tcp_user_timeout(std::time::Duration::from_secs(60));
        }
        // A process stopped inside a transaction (SIGSTOP, a debugger, a
        // VM paused) would hold its row locks for ever, and the other
        // watchers skip locked lease rows: the server ends such a
        // transaction after a quarter of a minute.
        if config.get_options().is_none() {
            config.options("-c idle_in_transaction_session_timeout=15000");
        }
        if config.get_keepalives_idle() == std::time::Duration::from_secs(2 * 60 * 60) {
            config.keepalives_idle(std::time::Duration::from_secs(30));
        }
        let tls = match config.get_ssl_mode() {
            postgres::config::SslMode::Require => Some(self.tls(root_file.as_deref())?),
            _ if root_file.is_some() => {
                return Err(self.refuse("sslrootcert is given but sslmode is not require"));
            }
            _ => None,
        };
        Ok(Connector { config, tls })
    }

    /// rustls, checking the server's certificate and name against the
    /// system's roots or those of `root_file`.
    fn tls(
        &self,
        root_file: Option<&str>,
    ) -> Result<tokio_postgres_rustls::MakeRustlsConnect, StoreError> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::CertificateDer;
        let mut roots = rustls::RootCertStore::empty();
        match root_file {
            Some(file) => {
                let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(file)
                    .and_then(|certs| certs.collect())
                    .map_err(|e| self.refuse(format!("cannot read sslrootcert {file}: {e}")))?;
                for cert in certs {
                    roots
                        .add(cert)
                        .map_err(|e| self.refuse(format!("sslrootcert {file}: {e}")))?;
                }
            }
            None => {
                let found = rustls_native_certs::load_native_certs();
                for cert in found.certs {
                    // A system certificate rustls cannot use is skipped,
                    // as every TLS client skips it.
                    let _ = roots.add(cert);
                }
            }
        }
        if roots.is_empty() {
            return Err(self.refuse(
                "sslmode=require but there is no root certificate to check the server with \
                 (install the system's CA certificates or name a PEM file with sslrootcert=)",
            ));
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| self.refuse(format!("TLS: {e}")))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
    }
}

/// `value` with what a URL's user information cannot hold as itself
/// percent-encoded (RFC 3986 unreserved characters stay).
fn percent_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// A query value with its `%XX` escapes decoded (a file path).
fn percent_decode(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (
            bytes[i],
            bytes.get(i + 1).copied().and_then(hex),
            bytes.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn the_password_comes_from_the_environment_and_is_never_shown() {
        let at = PostgresLocation::new("postgres://team:${PLUMBLINE_PW}@127.0.0.1:5432/history");
        let connector = at
            .connector_from(env(&[("PLUMBLINE_PW", "p@ss/w:rd")]))
            .expect("connects");
        assert_eq!(connector.config.get_password(), Some(&b"p@ss/w:rd"[..]));
        assert_eq!(connector.config.get_user(), Some("team"));
        assert_eq!(connector.config.get_dbname(), Some("history"));
        assert!(connector.tls.is_none());
        assert_eq!(at.redacted(), "postgres://…@127.0.0.1:5432/history");
        assert!(!format!("{at:?}").contains("PLUMBLINE_PW"));

        let e = at
            .connector_from(env(&[]))
            .err()
            .expect("unset")
            .to_string();
        assert!(e.contains("PLUMBLINE_PW it names is not set"), "{e}");
        let e = PostgresLocation::new("postgres://u:${PW@h/db")
            .connector_from(env(&[]))
            .err()
            .expect("unclosed")
            .to_string();
        assert!(e.contains("not closed"), "{e}");
    }

    #[test]
    fn sslmode_require_builds_tls_and_other_modes_do_not() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "").unwrap();
        let at = PostgresLocation::new(&format!(
            "postgresql://h/db?sslmode=verify-full&sslrootcert={}",
            empty.display()
        ));
        let e = at.connector().err().expect("no roots").to_string();
        assert!(e.contains("no root certificate"), "{e}");
        let e = PostgresLocation::new("postgres://h/db?sslrootcert=/x.pem")
            .connector()
            .err()
            .expect("without require")
            .to_string();
        assert!(e.contains("sslmode is not require"), "{e}");
        let e = PostgresLocation::new("postgres://h/db?sslmode=sometimes")
            .connector()
            .err()
            .expect("bad mode")
            .to_string();
        assert!(e.contains("not a PostgreSQL URL"), "{e}");
        let plain = PostgresLocation::new("postgres://h/db?sslmode=disable")
            .connector()
            .expect("plain");
        assert!(plain.tls.is_none());
        assert_eq!(plain.config.get_application_name(), Some("plumbline"));
        assert_eq!(plain.config.get_connect_timeout(), Some(&CONNECT_TIMEOUT));
        assert_eq!(
            plain.config.get_options(),
            Some("-c idle_in_transaction_session_timeout=15000")
        );
    }
}
