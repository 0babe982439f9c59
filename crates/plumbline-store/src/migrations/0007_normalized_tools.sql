-- Schema version 7: tools as compared, beside tools as sent.
--
-- A server's normalisation rules (plumbline.toml) rewrite text that varies
-- with where it is observed from (a working directory, a user name) before
-- anything is compared. The raw bytes stay the server's; the rewritten
-- tool is stored as raw_tools content of its own, and the entry names it
-- and the rules that changed it. The tool's version (its identity in
-- timelines, baselines and reviews) is then the rewritten tool's.

ALTER TABLE tool_set_entries ADD COLUMN normalized_raw_tool_id INTEGER REFERENCES raw_tools (id);
-- A JSON array of {"pointer", "rule"}: each string rewritten, and by which
-- rule. NULL exactly when normalized_raw_tool_id is.
ALTER TABLE tool_set_entries ADD COLUMN normalized_by TEXT;
