-- The schema Doppel 1.1's five migrations leave, created in one step on an
-- empty database. The ledger then records those five as applied, with the
-- checksums 1.1 knows them by, so that 1.1 reads this database as its own.

-- One row per configuration name: the document without its proxies, and
-- the revision of the whole document (its 64 bits in a signed column).
CREATE TABLE configurations (
    name       TEXT PRIMARY KEY,
    revision   BIGINT NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    settings   JSONB NOT NULL
);

-- One row per proxy; ordinal keeps the order they are tried in.
CREATE TABLE proxies (
    config   TEXT NOT NULL REFERENCES configurations ON DELETE CASCADE,
    name     TEXT NOT NULL,
    ordinal  INTEGER NOT NULL,
    document JSONB NOT NULL,
    PRIMARY KEY (config, name)
);

-- Template files; templates.dir is a cache of these. No foreign key: the
-- files of a deleted proxy are removed by the write that deletes it.
CREATE TABLE templates (
    config  TEXT NOT NULL,
    proxy   TEXT NOT NULL,
    file    TEXT NOT NULL,
    content BYTEA NOT NULL,
    PRIMARY KEY (config, proxy, file)
);
