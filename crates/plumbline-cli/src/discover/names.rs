//! Names, duplicates and secrets across all files.

use super::*;

pub(super) const MAX_NAME: usize = 100;

pub(super) fn finish(mut entries: Vec<Entry>) -> Vec<Found> {
    entries.sort_by(|a, b| {
        (a.client, &a.file, &a.scope, &a.name).cmp(&(b.client, &b.file, &b.scope, &b.name))
    });
    let mut kept: Vec<(Found, Vec<String>)> = Vec::new();
    // Final name → index in `kept`.
    let mut taken: BTreeMap<String, usize> = BTreeMap::new();
    // A configuration (as JSON) → index in `kept`, so that finding a
    // duplicate costs one lookup, not a scan (20,000 entries took 55 s).
    let mut by_config: std::collections::HashMap<String, usize> = Default::default();
    // The next suffix number to try per name and client.
    let mut suffixes: std::collections::HashMap<(String, Client), usize> = Default::default();
    for entry in entries {
        let origin = format!("{} ({})", entry.file.display(), entry.client.label());
        // The same server configured twice is observed once.
        let config_key = serde_json::to_string(&entry.config).unwrap_or_default();
        let origin_of = Origin {
            file: entry.file.clone(),
            scope: entry.scope.clone(),
            key: entry.name.clone(),
        };
        if let Some((first, _)) = by_config.get(&config_key).map(|&i| &mut kept[i]) {
            first.origins.push(origin_of);
            let also = if first.name == entry.name {
                format!("also defined in {origin}; imported once")
            } else {
                format!(
                    "also defined as {:?} in {origin}; imported once",
                    entry.name
                )
            };
            first.notes.push(also);
            continue;
        }
        let Review {
            literal_keys,
            secrets_to_set,
            mut notes,
        } = entry.review;
        let base = sanitize_name(&entry.name);
        if base != entry.name {
            notes.push(format!(
                "{:?} is not a valid Plumbline server name; imported as {base:?}",
                entry.name
            ));
        }
        let name = unique_name(&base, entry.client, &taken, &mut suffixes);
        if name != base {
            let (other, _) = &kept[taken[&base]];
            notes.push(format!(
                "renamed to {name:?}: {base:?} is also the name of a different server in {} ({})",
                other.file.display(),
                other.client.label()
            ));
        }
        taken.insert(name.clone(), kept.len());
        by_config.insert(config_key, kept.len());
        kept.push((
            Found {
                client: entry.client,
                file: entry.file,
                name,
                config: entry.config,
                secrets_to_set,
                notes,
                origins: vec![origin_of],
            },
            literal_keys,
        ));
    }

    // Literal values are replaced only now, so that the variables carry the
    // final, unique server names.
    let mut vars = BTreeSet::new();
    let mut found: Vec<Found> = kept
        .into_iter()
        .map(|(mut f, literal_keys)| {
            let (what, map) = match &mut f.config {
                ServerConfig::Stdio { env, .. } => ("environment variable", env),
                ServerConfig::Http { headers, .. } | ServerConfig::Sse { headers, .. } => ("header", headers),
            };
            for key in literal_keys {
                let var = fresh_variable(
                    &mut vars,
                    format!("PLUMBLINE_{}_{}", env_name(&f.name), env_name(&key)),
                );
                map.insert(key.clone(), format!("${{{var}}}"));
                f.notes.push(format!(
                    "{what} {key}: the value in {} is not a variable reference, so it is not copied; set {var} to it",
                    f.file.display()
                ));
                f.secrets_to_set.push(var);
            }
            // Literal secrets in arguments and URLs, likewise.
            let file = f.file.display().to_string();
            let server = env_name(&f.name);
            let mut moved: Vec<(String, String)> = Vec::new();
            let mut to_variable = |key: &str, _value: &str| -> String {
                let var = fresh_variable(&mut vars, format!("PLUMBLINE_{server}_{}", env_name(key)));
                moved.push((key.to_owned(), var.clone()));
                format!("${{{var}}}")
            };
            let what = match &mut f.config {
                ServerConfig::Stdio { args, .. } => {
                    *args = plumbline_base::redact::replace_args(args, &mut to_variable);
                    "argument"
                }
                ServerConfig::Http { url, .. } | ServerConfig::Sse { url, .. } => {
                    *url = plumbline_base::redact::replace_url(url, &mut to_variable).into_owned();
                    "URL"
                }
            };
            for (key, var) in moved {
                f.notes.push(format!(
                    "{what} {key}: the secret written in {file} is not copied; set {var} to it"
                ));
                f.secrets_to_set.push(var);
            }
            f.secrets_to_set.sort();
            f.secrets_to_set.dedup();
            f
        })
        .collect();
    found.sort_by(|a, b| (a.client, &a.file, &a.name).cmp(&(b.client, &b.file, &b.name)));
    found
}

/// Letters, digits, '-', '_' and '.', at most 100: every run of other
/// characters becomes one '_', and leading or trailing '_' from that are
/// trimmed.
pub(super) fn sanitize_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut replaced = false;
    for c in name.chars() {
        if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
            out.push(c);
            replaced = false;
        } else if !replaced {
            out.push('_');
            replaced = true;
        }
    }
    let trimmed = if out == name {
        out.as_str()
    } else {
        out.trim_matches('_')
    };
    // `.` and `..` would be path segments in every link to the server.
    let mut out = if trimmed.is_empty() || trimmed.bytes().all(|b| b == b'.') {
        "server".to_owned()
    } else {
        trimmed.to_owned()
    };
    // ASCII only by now, so any byte index is a character boundary.
    out.truncate(MAX_NAME);
    out
}

/// `base`, or `base_2`, `base_3`, … when taken; recorded as taken.
fn fresh_variable(taken: &mut BTreeSet<String>, base: String) -> String {
    let mut var = base.clone();
    let mut n = 2;
    while !taken.insert(var.clone()) {
        var = format!("{base}_{n}");
        n += 1;
    }
    var
}

/// `base`, or `base-<client>` (then `base-<client>-2`, …) when taken, within
/// the length limit. `next` remembers, per base and client, where the
/// search left off, so that many servers of one name cost linear time.
pub(super) fn unique_name(
    base: &str,
    client: Client,
    taken: &BTreeMap<String, usize>,
    next: &mut std::collections::HashMap<(String, Client), usize>,
) -> String {
    if !taken.contains_key(base) {
        return base.to_owned();
    }
    let n = next.entry((base.to_owned(), client)).or_insert(1);
    loop {
        let suffix = if *n == 1 {
            format!("-{}", client.label())
        } else {
            format!("-{}-{n}", client.label())
        };
        let name = format!(
            "{}{suffix}",
            &base[..base.len().min(MAX_NAME - suffix.len())]
        );
        *n += 1;
        if !taken.contains_key(&name) {
            return name;
        }
    }
}
