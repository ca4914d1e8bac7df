-- Replay: tensor snapshots attached to incidents, and the jobs that check them.
-- A snapshot's tensors live in the object store under their SHA-256 (`sha256`); the row keeps what
-- they hold (summary JSON) and the parameters sent with the upload (params JSON, re-applied on
-- load). `stored` = 0 once the tensors are gone (summary-only mode, retention); the summary and
-- the results stay. Times are Unix milliseconds.

CREATE TABLE snapshots (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    incident_id INTEGER NOT NULL REFERENCES incidents (id),
    sha256      TEXT NOT NULL,
    bytes       INTEGER NOT NULL,
    format      TEXT NOT NULL,           -- safetensors | npz
    summary     TEXT NOT NULL,           -- JSON SnapshotSummary
    params      TEXT NOT NULL,           -- JSON object sent with the upload
    stored      INTEGER NOT NULL,        -- 1 while the object store holds the tensors
    created_at  INTEGER NOT NULL
);
CREATE INDEX snapshots_incident ON snapshots (incident_id);
CREATE INDEX snapshots_sha256 ON snapshots (sha256);
CREATE INDEX snapshots_created ON snapshots (created_at);

CREATE TABLE replay_jobs (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    incident_id      INTEGER NOT NULL REFERENCES incidents (id),
    snapshot_id      INTEGER NOT NULL REFERENCES snapshots (id),
    state            TEXT NOT NULL,      -- queued | running | done | failed
    attempts         INTEGER NOT NULL,
    max_attempts     INTEGER NOT NULL,
    lease_owner      TEXT,
    lease_expires_at INTEGER,
    results          TEXT,               -- JSON array of CheckResult
    error            TEXT,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL
);
CREATE INDEX replay_jobs_state ON replay_jobs (state, id);
CREATE INDEX replay_jobs_incident ON replay_jobs (incident_id);
CREATE INDEX replay_jobs_snapshot ON replay_jobs (snapshot_id);
