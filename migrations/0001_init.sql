-- The durable store's catalog and clock.
-- diffsql.meta: named integer registers: last_ts (the last committed timestamp), history_since
-- (change history is retained for timestamps > history_since), next_table_id.
CREATE TABLE diffsql.meta (key VARCHAR PRIMARY KEY, value BIGINT NOT NULL);
INSERT INTO diffsql.meta VALUES ('last_ts', 0), ('history_since', 0), ('next_table_id', 1);

-- One row per user table (contents in main.<name>, change log in diffsql.log_<table_id>).
CREATE TABLE diffsql.tables (
    name VARCHAR PRIMARY KEY,
    table_id BIGINT NOT NULL,
    columns VARCHAR NOT NULL,      -- JSON: [{"name", "type", "nullable"}]
    primary_key VARCHAR NOT NULL,  -- JSON: [column names]
    created_ts BIGINT NOT NULL
);

-- One row per view; seq orders views so each comes after everything it reads.
CREATE TABLE diffsql.views (
    name VARCHAR PRIMARY KEY,
    seq BIGINT NOT NULL,
    sql VARCHAR NOT NULL,
    columns VARCHAR NOT NULL,       -- JSON: [{"name", "type", "nullable"}]
    dependencies VARCHAR NOT NULL,  -- JSON: [names]
    created_ts BIGINT NOT NULL
);
