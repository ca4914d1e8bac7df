-- A distributed job's incident: the files of its bundle and its ranks.
--
-- `incidents.bundle` holds the bundle's diagnosis (deflate of its JSON); the incident's own log and
-- diagnosis stay those of one file (the one that shows the first fault), so that lists, groups and
-- search work as for a single log. Every file the user submitted is kept (redacted, as logs are)
-- in `logs`, content-addressed, and listed in `incident_files` in the order it came. Each rank of
-- the job is a row of `incident_ranks` with its host and GPU, the first fault's row marked; a GPU
-- or a host the first fault names without a rank (an Xid's) is a row without a rank. `gpu_key`
-- names a GPU across incidents: `uuid:GPU-…`, else `bus:HOST/0000:3b:00`, else nothing; the
-- repeat-offender list counts the first-fault rows by it and by host.
ALTER TABLE incidents ADD COLUMN bundle BLOB;

CREATE TABLE incident_files (
    incident_id INTEGER NOT NULL REFERENCES incidents (id),
    ordinal     INTEGER NOT NULL,
    name        TEXT NOT NULL,
    kind        TEXT NOT NULL,       -- what the file is (rank_log, kernel_log, flight_recorder, …)
    log_hash    TEXT NOT NULL REFERENCES logs (hash),
    bytes       INTEGER NOT NULL,    -- as submitted
    is_binary   INTEGER NOT NULL,    -- 1: not text (a flight-recorder pickle): its readable text is kept
    PRIMARY KEY (incident_id, ordinal)
);

CREATE TABLE incident_ranks (
    incident_id INTEGER NOT NULL REFERENCES incidents (id),
    ordinal     INTEGER NOT NULL,
    global_rank INTEGER,
    host        TEXT,
    local_rank  INTEGER,
    gpu_index   INTEGER,
    gpu_bus_id  TEXT,
    gpu_uuid    TEXT,
    gpu_key     TEXT,
    first_fault INTEGER NOT NULL,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (incident_id, ordinal)
);
CREATE INDEX incident_ranks_gpu ON incident_ranks (first_fault, gpu_key);
CREATE INDEX incident_ranks_host ON incident_ranks (first_fault, host);
