-- The configuration, one row per configuration name: the document without
-- its proxies, and the revision of the whole document.
CREATE TABLE configurations (
    name     text PRIMARY KEY,
    revision text NOT NULL,
    settings jsonb NOT NULL
);

-- One row per proxy; ordinal keeps the order they are tried in.
CREATE TABLE proxies (
    config   text NOT NULL REFERENCES configurations (name) ON DELETE CASCADE,
    name     text NOT NULL,
    ordinal  integer NOT NULL,
    document jsonb NOT NULL,
    PRIMARY KEY (config, name)
);

-- Template files; templates.dir is a cache of these.
CREATE TABLE templates (
    config  text NOT NULL REFERENCES configurations (name) ON DELETE CASCADE,
    proxy   text NOT NULL,
    file    text NOT NULL,
    content bytea NOT NULL,
    PRIMARY KEY (config, proxy, file)
);
