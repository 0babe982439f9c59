-- Schema version 5: graded summaries of tool set changes.
--
-- Derived data: what changed between two tool sets, named by their
-- digests, as one version of the grader (`grader`) graded it, in an
-- encoding that grader owns. A grade depends only on the two sets and the
-- grader, so a row never goes stale; rows may be deleted at any time and
-- are computed again when needed. Readers of long histories (the
-- dashboard's overview) then pay for each change once, not per request.
CREATE TABLE drift_summaries (
    old_set BLOB NOT NULL,
    new_set BLOB NOT NULL,
    grader  TEXT NOT NULL,
    summary BLOB NOT NULL,
    PRIMARY KEY (old_set, new_set, grader)
) WITHOUT ROWID;
