-- The revisions Doppel in Go wrote, one row per configuration: a stored
-- revision that is not the one here was written by Doppel 1.1, whose
-- revision function differs, and is taken as stored until the next write
-- of ours (SPEC §19.3). A revision here that disagrees with its rows means
-- the rows were changed behind Doppel's back, and the load is refused.
CREATE TABLE doppel_revisions (
    config     TEXT PRIMARY KEY,
    revision   BIGINT NOT NULL,
    written_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
