-- Replay: tensor snapshots attached to incidents, and the jobs that check them.
-- Same meaning as migrations/sqlite/0002_replay.sql (see there).

CREATE TABLE snapshots (
    id          BIGSERIAL PRIMARY KEY,
    incident_id BIGINT NOT NULL REFERENCES incidents (id),
    sha256      TEXT NOT NULL,
    bytes       BIGINT NOT NULL,
    format      TEXT NOT NULL,
    summary     TEXT NOT NULL,
    params      TEXT NOT NULL,
    stored      BIGINT NOT NULL,
    created_at  BIGINT NOT NULL
);
CREATE INDEX snapshots_incident ON snapshots (incident_id);
CREATE INDEX snapshots_sha256 ON snapshots (sha256);
CREATE INDEX snapshots_created ON snapshots (created_at);

CREATE TABLE replay_jobs (
    id               BIGSERIAL PRIMARY KEY,
    incident_id      BIGINT NOT NULL REFERENCES incidents (id),
    snapshot_id      BIGINT NOT NULL REFERENCES snapshots (id),
    state            TEXT NOT NULL,
    attempts         BIGINT NOT NULL,
    max_attempts     BIGINT NOT NULL,
    lease_owner      TEXT,
    lease_expires_at BIGINT,
    results          TEXT,
    error            TEXT,
    created_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL
);
CREATE INDEX replay_jobs_state ON replay_jobs (state, id);
CREATE INDEX replay_jobs_incident ON replay_jobs (incident_id);
CREATE INDEX replay_jobs_snapshot ON replay_jobs (snapshot_id);
