//! The history's tables as both backends keep them, row by row: what
//! `store copy` moves from one store to another (SQLite to PostgreSQL and
//! back) and `store check` verifies. Both schemas have the same tables
//! and columns; only the types differ ([`Kind`]). Leases and watchers are
//! not history and are not copied.

use std::collections::{HashMap, HashSet};

use crate::listing::{tool_set_digest, Entry, NormalizedEntry};
use crate::{canonicalize, digest, Digest, Store, StoreError};

/// How a column is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Int,
    /// Bytes (a digest, a tool, a document).
    Blob,
    /// Text a server or a user chose: SQLite text, PostgreSQL bytea.
    Text,
    /// Text only plumbline writes: text on both.
    Plain,
}

/// One table: its columns, and the key its rows are ordered and paged by.
#[derive(Debug)]
pub struct Table {
    pub name: &'static str,
    pub columns: &'static [(&'static str, Kind)],
    pub key: &'static [&'static str],
}

use Kind::{Blob, Int, Plain, Text};

/// Every table of the history, each after those it refers to.
pub const TABLES: &[Table] = &[
    Table {
        name: "servers",
        columns: &[("id", Int), ("name", Text), ("identity", Plain)],
        key: &["id"],
    },
    Table {
        name: "tool_versions",
        columns: &[("id", Int), ("digest", Blob), ("canonical", Blob)],
        key: &["id"],
    },
    Table {
        name: "raw_tools",
        columns: &[
            ("id", Int),
            ("digest", Blob),
            ("raw", Blob),
            ("tool_version_id", Int),
        ],
        key: &["id"],
    },
    Table {
        name: "documents",
        columns: &[("id", Int), ("digest", Blob), ("body", Blob)],
        key: &["id"],
    },
    Table {
        name: "tool_sets",
        columns: &[("id", Int), ("digest", Blob), ("tool_count", Int)],
        key: &["id"],
    },
    Table {
        name: "tool_set_entries",
        columns: &[
            ("tool_set_id", Int),
            ("position", Int),
            ("name", Text),
            ("raw_tool_id", Int),
            ("normalized_raw_tool_id", Int),
            ("normalized_by", Plain),
        ],
        key: &["tool_set_id", "position"],
    },
    Table {
        name: "observations",
        columns: &[
            ("id", Int),
            ("server_id", Int),
            ("started_at_ms", Int),
            ("finished_at_ms", Int),
            ("outcome", Plain),
            ("error", Text),
            ("protocol_version", Text),
            ("server_info_id", Int),
            ("capabilities_id", Int),
            ("instructions_id", Int),
            ("tool_set_id", Int),
            ("authorization_id", Int),
        ],
        key: &["id"],
    },
    Table {
        name: "observation_problems",
        columns: &[
            ("observation_id", Int),
            ("seq", Int),
            ("kind", Plain),
            ("position", Int),
            ("tool_name", Text),
            ("message", Text),
        ],
        key: &["observation_id", "seq"],
    },
    Table {
        name: "alerts",
        columns: &[
            ("id", Int),
            ("server_id", Int),
            ("observation_id", Int),
            ("channel", Text),
            ("key", Text),
            ("body", Blob),
            ("created_at_ms", Int),
            ("attempts", Int),
            ("last_error", Text),
            ("delivered_at_ms", Int),
            ("next_attempt_at_ms", Int),
            ("failed_at_ms", Int),
        ],
        key: &["id"],
    },
    Table {
        name: "guard_events",
        columns: &[
            ("id", Int),
            ("server_id", Int),
            ("at_ms", Int),
            ("kind", Plain),
            ("tool", Text),
            ("detail", Plain),
        ],
        key: &["id"],
    },
    Table {
        name: "reviews",
        columns: &[
            ("observation_id", Int),
            ("tool_name", Text),
            ("status", Plain),
            ("reviewer", Text),
            ("at_ms", Int),
            ("note", Text),
        ],
        key: &["observation_id", "tool_name"],
    },
    Table {
        name: "baseline_servers",
        columns: &[("server_id", Int), ("materialised_at_ms", Int)],
        key: &["server_id"],
    },
    Table {
        name: "baselines",
        columns: &[
            ("server_id", Int),
            ("tool_name", Text),
            ("tool_version_id", Int),
            ("observation_id", Int),
            ("accepted_by", Text),
            ("accepted_at_ms", Int),
        ],
        key: &["server_id", "tool_name"],
    },
    Table {
        name: "tool_set_changes",
        columns: &[
            ("observation_id", Int),
            ("server_id", Int),
            ("previous_id", Int),
        ],
        key: &["observation_id"],
    },
    Table {
        name: "drift_summaries",
        columns: &[
            ("old_set", Blob),
            ("new_set", Blob),
            ("grader", Plain),
            ("summary", Blob),
        ],
        key: &["old_set", "new_set", "grader"],
    },
    Table {
        name: "inventories",
        columns: &[("id", Int), ("digest", Blob), ("names", Plain)],
        key: &["id"],
    },
    Table {
        name: "observation_inventories",
        columns: &[("observation_id", Int), ("inventory_id", Int)],
        key: &["observation_id"],
    },
];

/// One value of a row, whichever backend it came from (text as UTF-8).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Cell {
    Null,
    Int(i64),
    Bytes(Vec<u8>),
}

impl Cell {
    fn int(&self) -> Option<i64> {
        match self {
            Cell::Int(n) => Some(*n),
            _ => None,
        }
    }

    fn bytes(&self) -> Option<&[u8]> {
        match self {
            Cell::Bytes(b) => Some(b),
            _ => None,
        }
    }
}

/// A row: one cell per column of its table, in order.
pub type Row = Vec<Cell>;

/// The table called `name`.
pub fn table(name: &str) -> Option<&'static Table> {
    TABLES.iter().find(|t| t.name == name)
}

impl Table {
    /// Where the key's columns are in a row.
    pub fn key_positions(&self) -> Vec<usize> {
        self.key
            .iter()
            .map(|k| {
                self.columns
                    .iter()
                    .position(|(c, _)| c == k)
                    .expect("a key is a column")
            })
            .collect()
    }

    /// The key of `row`, to page after it.
    pub fn key_of(&self, row: &[Cell]) -> Vec<Cell> {
        self.key_positions()
            .iter()
            .map(|i| row[*i].clone())
            .collect()
    }
}

/// How many rows a table holds and the SHA-256 of all of them in key
/// order: equal on two stores exactly when the table is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableSum {
    pub table: &'static str,
    pub rows: u64,
    pub digest: Digest,
}

/// Rows read or written at a time.
pub const PAGE: u32 = 1000;

/// Calls `each` with every row of `table`, a page at a time, in key order.
pub fn each_row(
    store: &impl Store,
    table: &'static Table,
    mut each: impl FnMut(&[Row]) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    let mut after: Option<Vec<Cell>> = None;
    loop {
        let rows = store.read_rows(table.name, after.as_deref(), PAGE)?;
        if rows.is_empty() {
            return Ok(());
        }
        each(&rows)?;
        after = rows.last().map(|r| table.key_of(r));
        if rows.len() < PAGE as usize {
            return Ok(());
        }
    }
}

/// The [`TableSum`] of every table.
pub fn sums(store: &impl Store) -> Result<Vec<TableSum>, StoreError> {
    TABLES
        .iter()
        .map(|table| {
            let mut bytes = Vec::new();
            let mut rows = 0u64;
            each_row(store, table, |page| {
                for row in page {
                    rows += 1;
                    encode(row, &mut bytes);
                }
                Ok(())
            })?;
            Ok(TableSum {
                table: table.name,
                rows,
                digest: digest(&bytes),
            })
        })
        .collect()
}

/// A row's bytes for [`TableSum`]: each cell tagged and length-prefixed.
fn encode(row: &[Cell], out: &mut Vec<u8>) {
    for cell in row {
        match cell {
            Cell::Null => out.push(0),
            Cell::Int(n) => {
                out.push(1);
                out.extend_from_slice(&n.to_be_bytes());
            }
            Cell::Bytes(b) => {
                out.push(2);
                out.extend_from_slice(&(b.len() as u64).to_be_bytes());
                out.extend_from_slice(b);
            }
        }
    }
}

/// What `store check` found wrong; empty when the store is sound.
pub fn check(store: &impl Store) -> Result<Vec<String>, StoreError> {
    let mut findings = Vec::new();
    let mut ids: HashMap<&'static str, HashSet<i64>> = HashMap::new();
    // Content: each digest is its content's.
    let mut versions: HashMap<i64, Digest> = HashMap::new();
    let mut raws: HashMap<i64, (Digest, Option<i64>)> = HashMap::new();
    for (name, body) in [
        ("tool_versions", 2),
        ("raw_tools", 2),
        ("documents", 2),
        ("inventories", 2),
    ] {
        let table = table(name).expect("a table");
        each_row(store, table, |page| {
            for row in page {
                let id = row[0].int().unwrap_or_default();
                ids.entry(table.name).or_default().insert(id);
                let stored = row[1].bytes().and_then(Digest::from_slice);
                let content = row[body].bytes().unwrap_or_default();
                let Some(stored) = stored else {
                    findings.push(format!("{name} {id}: its digest is not 32 bytes"));
                    continue;
                };
                if digest(content) != stored {
                    findings.push(format!("{name} {id}: its digest is not its content's"));
                }
                match name {
                    "tool_versions" => {
                        if canonicalize(content).ok().as_deref() != Some(content) {
                            findings.push(format!("tool version {id} is not in canonical form"));
                        }
                        versions.insert(id, stored);
                    }
                    "raw_tools" => {
                        raws.insert(id, (stored, row[3].int()));
                    }
                    _ => {}
                }
            }
            Ok(())
        })?;
    }
    for (id, (_, version)) in &raws {
        if let Some(v) = version {
            if !versions.contains_key(v) {
                findings.push(format!("raw tool {id} names a missing tool version {v}"));
            }
        }
    }
    // Tool sets: each digest is its entries'.
    let mut sets: HashMap<i64, (Digest, i64)> = HashMap::new();
    each_row(store, table("tool_sets").expect("a table"), |page| {
        for row in page {
            let id = row[0].int().unwrap_or_default();
            match row[1].bytes().and_then(Digest::from_slice) {
                Some(d) => {
                    sets.insert(id, (d, row[2].int().unwrap_or(-1)));
                }
                None => findings.push(format!("tool set {id}: its digest is not 32 bytes")),
            }
        }
        Ok(())
    })?;
    let mut entries: HashMap<i64, Vec<Row>> = HashMap::new();
    each_row(store, table("tool_set_entries").expect("a table"), |page| {
        for row in page {
            let set = row[0].int().unwrap_or_default();
            entries.entry(set).or_default().push(row.clone());
        }
        Ok(())
    })?;
    for (set, (stored, count)) in &sets {
        let rows = entries.remove(set).unwrap_or_default();
        if rows.len() as i64 != *count {
            findings.push(format!(
                "tool set {set} counts {count} tools but has {}",
                rows.len()
            ));
        }
        let mut listing = Vec::with_capacity(rows.len());
        let mut sound = true;
        for row in &rows {
            let raw_id = row[3].int().unwrap_or_default();
            let Some((raw_digest, raw_version)) = raws.get(&raw_id) else {
                findings.push(format!("tool set {set} names a missing raw tool {raw_id}"));
                sound = false;
                continue;
            };
            let normalized = match (row[4].int(), row[5].bytes()) {
                (Some(n_id), Some(by)) => match raws.get(&n_id) {
                    Some((n_digest, _)) => Some(NormalizedEntry {
                        raw_tool_id: n_id,
                        raw_digest: *n_digest,
                        by: String::from_utf8_lossy(by).into_owned(),
                    }),
                    None => {
                        findings.push(format!("tool set {set} names a missing raw tool {n_id}"));
                        sound = false;
                        continue;
                    }
                },
                _ => None,
            };
            let canonical = |version: &Option<i64>| version.and_then(|v| versions.get(&v).copied());
            let canonical_digest = match &normalized {
                Some(n) => raws
                    .get(&n.raw_tool_id)
                    .and_then(|(_, v)| canonical(v))
                    .or_else(|| canonical(raw_version)),
                None => canonical(raw_version),
            };
            listing.push((
                row[1].int().unwrap_or_default() as u32,
                row[2]
                    .bytes()
                    .map(|b| String::from_utf8_lossy(b).into_owned()),
                raw_id,
                *raw_digest,
                canonical_digest,
                normalized,
            ));
        }
        if sound {
            let listing: Vec<Entry<'_>> = listing
                .iter()
                .map(
                    |(position, name, raw_id, raw_digest, canonical, normalized)| Entry {
                        position: *position,
                        name: name.as_deref(),
                        raw_tool_id: *raw_id,
                        raw_digest: *raw_digest,
                        canonical_digest: *canonical,
                        normalized: normalized.as_ref().map(|n| NormalizedEntry {
                            raw_tool_id: n.raw_tool_id,
                            raw_digest: n.raw_digest,
                            by: n.by.clone(),
                        }),
                    },
                )
                .collect();
            if tool_set_digest(&listing) != *stored {
                findings.push(format!("tool set {set}: its digest is not its entries'"));
            }
        }
    }
    for set in entries.keys() {
        findings.push(format!("entries name a missing tool set {set}"));
    }
    // Observations and what refers to them.
    for name in ["servers", "observations", "alerts"] {
        each_row(store, table(name).expect("a table"), |page| {
            for row in page {
                ids.entry(name)
                    .or_default()
                    .insert(row[0].int().unwrap_or_default());
            }
            Ok(())
        })?;
    }
    let has = |ids: &HashMap<&'static str, HashSet<i64>>, table: &str, id: Option<i64>| {
        id.is_none_or(|id| ids.get(table).is_some_and(|s| s.contains(&id)))
    };
    each_row(store, table("observations").expect("a table"), |page| {
        for row in page {
            let id = row[0].int().unwrap_or_default();
            let refs = [
                ("servers", row[1].int()),
                ("documents", row[7].int()),
                ("documents", row[8].int()),
                ("documents", row[9].int()),
                ("documents", row[11].int()),
            ];
            for (table, r) in refs {
                if !has(&ids, table, r) {
                    findings.push(format!(
                        "observation {id} names a missing {table} row {r:?}"
                    ));
                }
            }
            if let Some(set) = row[10].int() {
                if !sets.contains_key(&set) {
                    findings.push(format!("observation {id} names a missing tool set {set}"));
                }
            }
            let ok = row[4].bytes() == Some(b"ok");
            if ok != row[10].int().is_some() || ok == (row[5] != Cell::Null) {
                findings.push(format!(
                    "observation {id}: its outcome and tool set disagree"
                ));
            }
        }
        Ok(())
    })?;
    for (name, columns) in [
        ("observation_problems", &[("observations", 0)][..]),
        ("alerts", &[("servers", 1), ("observations", 2)][..]),
        ("reviews", &[("observations", 0)][..]),
        ("baseline_servers", &[("servers", 0)][..]),
        ("baselines", &[("servers", 0), ("observations", 3)][..]),
        (
            "tool_set_changes",
            &[("observations", 0), ("servers", 1), ("observations", 2)][..],
        ),
        (
            "observation_inventories",
            &[("observations", 0), ("inventories", 1)][..],
        ),
    ] {
        each_row(store, table(name).expect("a table"), |page| {
            for row in page {
                for (target, i) in columns {
                    if !has(&ids, target, row[*i].int()) {
                        findings.push(format!(
                            "a {name} row names a missing {target} row {:?}",
                            row[*i].int()
                        ));
                    }
                }
                if name == "baselines" && !versions.contains_key(&row[2].int().unwrap_or(-1)) {
                    findings.push(format!(
                        "a baselines row names a missing tool version {:?}",
                        row[2].int()
                    ));
                }
            }
            Ok(())
        })?;
    }
    Ok(findings)
}

/// What a copy did, table by table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Copied {
    pub table: &'static str,
    /// Rows the destination did not have yet.
    pub written: u64,
}

/// Copies every row `from` holds that `to` lacks, table by table in the
/// order they refer to each other, then verifies that every table is the
/// same on both (counts and digests). Idempotent: a second copy writes
/// nothing. `progress` hears each page (table, rows read so far).
pub fn copy(
    from: &impl Store,
    to: &mut impl Store,
    mut progress: impl FnMut(&'static str, u64),
) -> Result<Vec<Copied>, StoreError> {
    let mut copied = Vec::new();
    for table in TABLES {
        let mut written = 0;
        let mut read = 0;
        each_row(from, table, |page| {
            written += to.write_rows(table.name, page)?;
            read += page.len() as u64;
            progress(table.name, read);
            Ok(())
        })?;
        copied.push(Copied {
            table: table.name,
            written,
        });
    }
    to.finish_writing_rows()?;
    Ok(copied)
}

/// Reads one table a page at a time, a row at a time.
struct Cursor<'a, S> {
    store: &'a S,
    table: &'static Table,
    page: std::collections::VecDeque<Row>,
    done: bool,
}

impl<'a, S: Store> Cursor<'a, S> {
    fn new(store: &'a S, table: &'static Table) -> Self {
        Cursor {
            store,
            table,
            page: Default::default(),
            done: false,
        }
    }

    fn peek(&mut self, after: Option<&[Cell]>) -> Result<Option<&Row>, StoreError> {
        if self.page.is_empty() && !self.done {
            let rows = self.store.read_rows(self.table.name, after, PAGE)?;
            self.done = rows.len() < PAGE as usize;
            self.page.extend(rows);
        }
        Ok(self.page.front())
    }
}

/// Keys in the order both backends read them: numbers by value, bytes
/// byte by byte, NULL first.
fn key_order(a: &[Cell], b: &[Cell]) -> std::cmp::Ordering {
    let rank = |c: &Cell| match c {
        Cell::Null => 0,
        Cell::Int(_) => 1,
        Cell::Bytes(_) => 2,
    };
    for (x, y) in a.iter().zip(b) {
        let order = match (x, y) {
            (Cell::Int(x), Cell::Int(y)) => x.cmp(y),
            (Cell::Bytes(x), Cell::Bytes(y)) => x.cmp(y),
            _ => rank(x).cmp(&rank(y)),
        };
        if order.is_ne() {
            return order;
        }
    }
    std::cmp::Ordering::Equal
}

/// Where `to` holds a row that `from` does not hold as it is (another
/// history, or one that changed since): copying `from` into it would mix
/// the two. Empty when `to` is empty or a part of `from` (a copy stopped
/// half way, or done before). At most ten differences are listed.
pub fn not_part_of(to: &impl Store, from: &impl Store) -> Result<Vec<String>, StoreError> {
    let mut differences = Vec::new();
    for table in TABLES {
        let mut source = Cursor::new(from, table);
        let mut last: Option<Vec<Cell>> = None;
        let mut stop = false;
        each_row(to, table, |page| {
            for row in page {
                if stop {
                    return Ok(());
                }
                let key = table.key_of(row);
                // Source rows before this key are ones the copy adds.
                loop {
                    let next = source.peek(last.as_deref())?.cloned();
                    match next {
                        Some(s) if key_order(&table.key_of(&s), &key).is_lt() => {
                            last = Some(table.key_of(&s));
                            source.page.pop_front();
                        }
                        Some(s) if s == *row => {
                            last = Some(key.clone());
                            source.page.pop_front();
                            break;
                        }
                        _ => {
                            differences.push(format!(
                                "{}: the destination's row {key:?} is not the source's",
                                table.name
                            ));
                            if differences.len() >= 10 {
                                stop = true;
                            }
                            break;
                        }
                    }
                }
            }
            Ok(())
        })?;
        if stop {
            break;
        }
    }
    Ok(differences)
}
