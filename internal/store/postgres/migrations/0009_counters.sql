-- The fleet's counters (SPEC §18.1): the counts of the faults' `when`
-- conditions, one row per (configuration, proxy, proxy revision, session,
-- mock, fault, key), incremented by the request that counts in one
-- statement, so that every replica counts in the same rows. key_hash is
-- the SHA-256 of the whole key (a header value), key its first 256 bytes
-- to show. A revision no longer served loses its rows.
CREATE TABLE doppel_counters (
    config     TEXT NOT NULL,
    proxy      TEXT NOT NULL,
    revision   TEXT NOT NULL,
    session    TEXT NOT NULL,
    mock       TEXT NOT NULL,
    fault      TEXT NOT NULL,
    key_hash   BYTEA NOT NULL,
    key        TEXT NOT NULL,
    n          BIGINT NOT NULL,
    first_seen TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (config, proxy, revision, session, mock, fault, key_hash)
);
CREATE INDEX doppel_counters_age ON doppel_counters (config, proxy, revision, session, first_seen);
