-- Sessions (SPEC §17.5): overlays of mocks and faults in force only for
-- the requests that carry their id, shared by every replica of the
-- configuration. body is the session as its caller wrote it; a row past
-- expires_at is no longer live and is removed by the next write.
CREATE TABLE sessions (
    config     text NOT NULL,
    id         text NOT NULL,
    revision   text NOT NULL,
    expires_at timestamptz NOT NULL,
    body       jsonb NOT NULL,
    PRIMARY KEY (config, id)
);
