//! Whole rows of the history's tables ([`crate::tables`]), for copying a
//! store and checking one.

use postgres::types::ToSql;

use super::Session;
use crate::tables::{Cell, Kind, Row, Table, TABLES};
use crate::StoreError;

/// A cell as PostgreSQL binds it for a column of `kind`.
enum Param {
    Int(Option<i64>),
    Bytes(Option<Vec<u8>>),
    Text(Option<String>),
}

impl Param {
    fn of(cell: &Cell, kind: Kind) -> Result<Param, String> {
        Ok(match (kind, cell) {
            (Kind::Int, Cell::Null) => Param::Int(None),
            (Kind::Int, Cell::Int(n)) => Param::Int(Some(*n)),
            (Kind::Blob | Kind::Text, Cell::Null) => Param::Bytes(None),
            (Kind::Blob | Kind::Text, Cell::Bytes(b)) => Param::Bytes(Some(b.clone())),
            (Kind::Plain, Cell::Null) => Param::Text(None),
            (Kind::Plain, Cell::Bytes(b)) => Param::Text(Some(
                String::from_utf8(b.clone()).map_err(|_| "text that is not UTF-8".to_owned())?,
            )),
            (kind, cell) => return Err(format!("{cell:?} where a {kind:?} column is")),
        })
    }

    fn sql(&self) -> &(dyn ToSql + Sync) {
        match self {
            Param::Int(v) => v,
            Param::Bytes(v) => v,
            Param::Text(v) => v,
        }
    }
}

impl Session {
    fn table(&self, name: &str) -> Result<&'static Table, StoreError> {
        crate::tables::table(name)
            .ok_or_else(|| self.corrupt(format!("there is no table {name:?} to copy")))
    }

    fn params(&self, name: &str, cells: &[Cell], kinds: &[Kind]) -> Result<Vec<Param>, StoreError> {
        cells
            .iter()
            .zip(kinds)
            .map(|(cell, kind)| {
                Param::of(cell, *kind).map_err(|e| self.corrupt(format!("a row of {name}: {e}")))
            })
            .collect()
    }

    pub(super) fn rows_of(
        &mut self,
        name: &str,
        after: Option<&[Cell]>,
        limit: u32,
    ) -> Result<Vec<Row>, StoreError> {
        let table = self.table(name)?;
        let columns: Vec<&str> = table.columns.iter().map(|(c, _)| *c).collect();
        let key = key_expr(table);
        let filter = match after {
            Some(after) => {
                let marks: Vec<String> = (1..=after.len()).map(|i| format!("${i}")).collect();
                format!("WHERE ({key}) > ({})", marks.join(", "))
            }
            None => String::new(),
        };
        let limit_mark = after.map_or(1, |a| a.len() + 1);
        let sql = format!(
            "SELECT {} FROM {} {filter} ORDER BY {key} LIMIT ${limit_mark}",
            columns.join(", "),
            table.name,
        );
        let key_kinds: Vec<Kind> = table
            .key_positions()
            .iter()
            .map(|i| table.columns[*i].1)
            .collect();
        let mut params = match after {
            Some(after) => self.params(name, after, &key_kinds)?,
            None => Vec::new(),
        };
        params.push(Param::Int(Some(i64::from(limit))));
        let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(Param::sql).collect();
        let what = format!("the rows of {name}");
        let rows = self.rows(&what, &sql, &refs)?;
        rows.iter()
            .map(|row| {
                table
                    .columns
                    .iter()
                    .enumerate()
                    .map(|(i, (_, kind))| {
                        Ok(match kind {
                            Kind::Int => self
                                .get::<Option<i64>>(row, i, &what)?
                                .map_or(Cell::Null, Cell::Int),
                            Kind::Blob | Kind::Text => self
                                .get::<Option<Vec<u8>>>(row, i, &what)?
                                .map_or(Cell::Null, Cell::Bytes),
                            Kind::Plain => self
                                .get::<Option<String>>(row, i, &what)?
                                .map_or(Cell::Null, |t| Cell::Bytes(t.into_bytes())),
                        })
                    })
                    .collect()
            })
            .collect()
    }

    pub(super) fn put_rows(&mut self, name: &str, rows: &[Row]) -> Result<u64, StoreError> {
        let table = self.table(name)?;
        let kinds: Vec<Kind> = table.columns.iter().map(|(_, k)| *k).collect();
        let all = rows
            .iter()
            .map(|row| self.params(name, row, &kinds))
            .collect::<Result<Vec<_>, _>>()?;
        let columns: Vec<&str> = table.columns.iter().map(|(c, _)| *c).collect();
        let marks: Vec<String> = (1..=columns.len()).map(|i| format!("${i}")).collect();
        let sql = format!(
            "INSERT INTO {} ({}) VALUES ({}) ON CONFLICT DO NOTHING",
            table.name,
            columns.join(", "),
            marks.join(", ")
        );
        let err = self.derived_err("copied rows");
        let mut db = self.db().map_err(&err)?;
        let mut tx = db.transaction().map_err(&err)?;
        let mut written = 0;
        for params in &all {
            let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(Param::sql).collect();
            written += tx.execute(&sql, &refs).map_err(&err)?;
        }
        // With the rows: a copy stopped half way leaves no identity behind
        // the ids it wrote.
        if table.key == ["id"] {
            tx.execute(&follow_ids(table.name), &[]).map_err(&err)?;
        }
        tx.commit().map_err(&err)?;
        Ok(written)
    }

    /// Moves each identity past the highest id written, so that rows
    /// recorded after a copy never take a copied row's id.
    pub(super) fn follow_written_ids(&mut self) -> Result<(), StoreError> {
        let err = self.derived_err("the tables' ids");
        let mut db = self.db().map_err(&err)?;
        for table in TABLES.iter().filter(|t| t.key == ["id"]) {
            db.execute(&follow_ids(table.name), &[]).map_err(&err)?;
        }
        // Each server's tool names, derived from the observations copied
        // (as schema version 6 builds them).
        let mut tx = db.transaction().map_err(&err)?;
        tx.execute("DELETE FROM server_names", &[]).map_err(&err)?;
        tx.execute(
            "INSERT INTO server_names (server_id, name)
             SELECT o.server_id, e.name FROM observations o
             JOIN tool_set_entries e ON e.tool_set_id = o.tool_set_id
             WHERE e.name IS NOT NULL AND o.id IN
                 (SELECT max(id) FROM observations WHERE outcome = 'ok' GROUP BY server_id)
             ON CONFLICT DO NOTHING",
            &[],
        )
        .map_err(&err)?;
        tx.commit().map_err(&err)
    }
}

/// Moves `table`'s identity past its highest id.
fn follow_ids(table: &str) -> String {
    format!(
        "SELECT setval(pg_get_serial_sequence('{table}', 'id'),
                       COALESCE((SELECT max(id) FROM {table}), 0) + 1, false)"
    )
}

/// The key of `table` as PostgreSQL orders and compares it: text keys in
/// byte order (`COLLATE "C"`), as SQLite orders them, whatever the
/// database's collation.
pub(crate) fn key_expr(table: &Table) -> String {
    table
        .key
        .iter()
        .map(|k| {
            let kind = table
                .columns
                .iter()
                .find(|(c, _)| c == k)
                .map(|(_, kind)| *kind);
            if kind == Some(Kind::Plain) {
                format!("{k} COLLATE \"C\"")
            } else {
                (*k).to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}
