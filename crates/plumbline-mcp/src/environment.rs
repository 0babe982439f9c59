//! The environment a process Plumbline starts (a stdio server, an alert
//! hook) begins with.
//!
//! Plumbline's own environment is where every configured `${VAR}` secret
//! lives: the tokens of *other* servers, webhook secrets, the dashboard
//! token, cloud keys. A server that could read them could publish them in
//! a tool description, and from there they would reach the store and
//! everyone who reads it. So a child starts from an empty environment and
//! gets back only what a program needs to run at all (the list the
//! official MCP SDKs inherit, plus locale and temporary directory), the
//! names a user chose to pass through, and its own configured values.

use std::ffi::OsString;

/// Variables every child inherits, when set: enough to find programs,
/// a home directory and a locale. `LC_*` are inherited too
/// ([`is_inherited_by_default`]).
pub const DEFAULT_INHERITED: &[&str] = &[
    "HOME", "LANG", "LOGNAME", "PATH", "SHELL", "TERM", "TMPDIR", "USER",
];

/// Whether `name` is inherited without being asked for.
pub fn is_inherited_by_default(name: &str) -> bool {
    DEFAULT_INHERITED.contains(&name) || name.starts_with("LC_")
}

/// The environment for a child: the defaults and the names in `inherit`,
/// taken from `parent`, then `own` (which wins over anything inherited).
/// Sorted by name, each name once.
pub fn child_environment<I>(
    parent: I,
    inherit: &[String],
    own: &[(String, String)],
) -> Vec<(OsString, OsString)>
where
    I: IntoIterator<Item = (OsString, OsString)>,
{
    let mut env = std::collections::BTreeMap::<OsString, OsString>::new();
    for (name, value) in parent {
        let wanted = name
            .to_str()
            .is_some_and(|n| is_inherited_by_default(n) || inherit.iter().any(|i| i == n));
        if wanted {
            env.insert(name, value);
        }
    }
    for (name, value) in own {
        env.insert(OsString::from(name), OsString::from(value));
    }
    env.into_iter().collect()
}

/// [`child_environment`] from this process's environment.
pub fn child_environment_from_ours(
    inherit: &[String],
    own: &[(String, String)],
) -> Vec<(OsString, OsString)> {
    child_environment(std::env::vars_os(), inherit, own)
}

/// Replaces `command`'s environment with exactly `env`.
pub(crate) fn apply(command: &mut tokio::process::Command, env: &[(OsString, OsString)]) {
    command
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k.as_os_str(), v.as_os_str())));
}

/// Whether `name` may be used in an `inherit_env` list: a non-empty
/// portable variable name.
pub fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect()
    }

    #[test]
    fn only_the_allowlist_the_asked_names_and_the_own_values() {
        let parent = os(&[
            ("PATH", "/usr/bin"),
            ("HOME", "/home/u"),
            ("LC_ALL", "C.UTF-8"),
            ("GITHUB_TOKEN", "ghp_secret"),
            ("PLUMBLINE_TOKEN", "dash"),
            ("AWS_SECRET_ACCESS_KEY", "aws"),
            ("HTTPS_PROXY", "http://proxy"),
        ]);
        let env = child_environment(
            parent,
            &["HTTPS_PROXY".to_owned()],
            &[
                ("API_KEY".to_owned(), "mine".to_owned()),
                ("HOME".to_owned(), "/srv".to_owned()),
            ],
        );
        assert_eq!(
            env,
            os(&[
                ("API_KEY", "mine"),
                ("HOME", "/srv"),
                ("HTTPS_PROXY", "http://proxy"),
                ("LC_ALL", "C.UTF-8"),
                ("PATH", "/usr/bin"),
            ])
        );
    }

    #[test]
    fn names() {
        assert!(is_valid_name("HTTPS_PROXY") && is_valid_name("_x1"));
        assert!(!is_valid_name("") && !is_valid_name("1A") && !is_valid_name("A=B"));
        assert!(is_inherited_by_default("LC_CTYPE") && !is_inherited_by_default("LD_PRELOAD"));
    }
}
