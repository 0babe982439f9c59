-- Schema version 8: what a change was graded with.
--
-- The references rules (another tool named, an instruction about another
-- tool) read the names of the tools of the *other* servers the history
-- holds: a change's grade depends on that foreign inventory as well as
-- on its two tool sets. The inventory an observation's change was graded
-- with is kept here, once per distinct inventory, so that every reader
-- grades it again with exactly what the recorder used. The digest is
-- SHA-256 of `names` (a canonical JSON array of the names, sorted, each
-- once); stored grades are filed under a key that names it.
CREATE TABLE inventories (
    id     INTEGER PRIMARY KEY,
    digest BLOB NOT NULL UNIQUE,
    names  TEXT NOT NULL
);

CREATE TABLE observation_inventories (
    observation_id INTEGER PRIMARY KEY REFERENCES observations (id),
    inventory_id   INTEGER NOT NULL REFERENCES inventories (id)
) WITHOUT ROWID;
