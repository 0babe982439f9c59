//! Whole rows of the history's tables ([`crate::tables`]), for copying a
//! store and checking one.

use rusqlite::types::{Value, ValueRef};

use super::*;
use crate::tables::{Cell, Kind, Row, Table};

fn known(path: &Path, name: &str) -> Result<&'static Table, StoreError> {
    crate::tables::table(name).ok_or_else(|| StoreError::Corrupt {
        path: path.to_path_buf(),
        detail: format!("there is no table {name:?} to copy"),
    })
}

/// `WHERE (k1, k2) > (?1, ?2)`, or nothing for the first page.
fn after_clause(table: &Table, first: usize, dollar: bool) -> String {
    let keys = table.key.join(", ");
    let marks: Vec<String> = (0..table.key.len())
        .map(|i| {
            if dollar {
                format!("${}", first + i)
            } else {
                format!("?{}", first + i)
            }
        })
        .collect();
    format!("WHERE ({keys}) > ({})", marks.join(", "))
}

/// A cell as SQLite binds it for a column of `kind`.
fn value(cell: &Cell, kind: Kind, path: &Path, table: &str) -> Result<Value, StoreError> {
    Ok(match (cell, kind) {
        (Cell::Null, _) => Value::Null,
        (Cell::Int(n), _) => Value::Integer(*n),
        (Cell::Bytes(b), Kind::Blob) => Value::Blob(b.clone()),
        (Cell::Bytes(b), Kind::Text | Kind::Plain | Kind::Int) => Value::Text(
            String::from_utf8(b.clone()).map_err(|_| StoreError::Corrupt {
                path: path.to_path_buf(),
                detail: format!("a row of {table} holds text that is not UTF-8"),
            })?,
        ),
    })
}

impl SqliteStore {
    pub(super) fn rows_of(
        &self,
        name: &str,
        after: Option<&[Cell]>,
        limit: u32,
    ) -> Result<Vec<Row>, StoreError> {
        let table = known(&self.path, name)?;
        let columns: Vec<&str> = table.columns.iter().map(|(c, _)| *c).collect();
        let filter = match after {
            Some(_) => after_clause(table, 1, false),
            None => String::new(),
        };
        let limit_mark = after.map_or(1, |a| a.len() + 1);
        let sql = format!(
            "SELECT {} FROM {} {filter} ORDER BY {} LIMIT ?{limit_mark}",
            columns.join(", "),
            table.name,
            table.key.join(", ")
        );
        let mut params: Vec<Value> = Vec::new();
        if let Some(after) = after {
            for (cell, key) in after.iter().zip(table.key_positions()) {
                params.push(value(cell, table.columns[key].1, &self.path, name)?);
            }
        }
        params.push(Value::Integer(i64::from(limit)));
        self.conn
            .prepare_cached(&sql)
            .and_then(|mut stmt| {
                stmt.query_map(rusqlite::params_from_iter(params), |row| {
                    (0..columns.len())
                        .map(|i| {
                            Ok(match row.get_ref(i)? {
                                ValueRef::Null => Cell::Null,
                                ValueRef::Integer(n) => Cell::Int(n),
                                ValueRef::Real(f) => Cell::Int(f as i64),
                                ValueRef::Text(b) | ValueRef::Blob(b) => Cell::Bytes(b.to_vec()),
                            })
                        })
                        .collect::<rusqlite::Result<Row>>()
                })?
                .collect()
            })
            .map_err(|source| self.read_err(format!("the rows of {name}"), source))
    }

    pub(super) fn put_rows(&mut self, name: &str, rows: &[Row]) -> Result<u64, StoreError> {
        let table = known(&self.path, name)?;
        let path = self.path.clone();
        let err = |source| StoreError::WriteDerived {
            path: path.clone(),
            what: "copied rows",
            source: Box::new(source),
        };
        let columns: Vec<&str> = table.columns.iter().map(|(c, _)| *c).collect();
        let marks: Vec<String> = (1..=columns.len()).map(|i| format!("?{i}")).collect();
        let sql = format!(
            "INSERT INTO {} ({}) VALUES ({}) ON CONFLICT DO NOTHING",
            table.name,
            columns.join(", "),
            marks.join(", ")
        );
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(err)?;
        let mut written = 0;
        {
            let mut stmt = tx.prepare_cached(&sql).map_err(err)?;
            for row in rows {
                let values = row
                    .iter()
                    .zip(table.columns)
                    .map(|(cell, (_, kind))| value(cell, *kind, &path, name))
                    .collect::<Result<Vec<_>, _>>()?;
                written += stmt
                    .execute(rusqlite::params_from_iter(values))
                    .map_err(err)? as u64;
            }
        }
        tx.commit().map_err(err)?;
        Ok(written)
    }
}
