-- The fleet's registry (SPEC §18.1): one row per running replica of a
-- configuration, written at start, refreshed by a heartbeat every 2 s and
-- deleted on a clean shutdown. A row whose seen_at is older than 10 s is a
-- lost replica, reported for 5 minutes and then deleted.
CREATE TABLE doppel_replicas (
    id         TEXT PRIMARY KEY,
    config     TEXT NOT NULL,
    url        TEXT NOT NULL,
    host       TEXT NOT NULL,
    pid        INTEGER NOT NULL,
    version    TEXT NOT NULL,
    revision   TEXT NOT NULL,
    started_at TIMESTAMPTZ NOT NULL,
    seen_at    TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX doppel_replicas_config ON doppel_replicas (config, seen_at);
