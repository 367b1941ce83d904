-- Checkpoints of the views' retained history, so a restart need not replay the change log to
-- rebuild it. diffsql.view_history holds, per view (by seq), chunks of history batches: the
-- pickled list of (timestamp, [(row, diff)]) with timestamp in (from_ts, through_ts] and
-- > base_ts, where base_ts is the view's history start at through_ts. meta checkpoint_ts is the
-- last timestamp through which every view running then has a chunk (0: never checkpointed).
CREATE TABLE diffsql.view_history (
    seq BIGINT NOT NULL,
    from_ts BIGINT NOT NULL,
    through_ts BIGINT NOT NULL,
    base_ts BIGINT NOT NULL,
    data BLOB NOT NULL
);
INSERT INTO diffsql.meta VALUES ('checkpoint_ts', 0);
