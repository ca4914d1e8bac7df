-- The knowledge base: logs (content-addressed, compressed), groups of incidents by fingerprint,
-- incidents with their diagnosis, the rules each incident matched, feedback, notes, API tokens.
-- Times are Unix milliseconds. Same version numbers as migrations/sqlite.

CREATE TABLE logs (
    hash  TEXT PRIMARY KEY,
    bytes BIGINT NOT NULL,
    lines BIGINT NOT NULL,
    data  BYTEA NOT NULL
);

CREATE TABLE groups (
    id          BIGSERIAL PRIMARY KEY,
    fingerprint TEXT NOT NULL UNIQUE,
    class       TEXT NOT NULL,
    rule        TEXT NOT NULL,
    title       TEXT NOT NULL,
    message     TEXT NOT NULL,
    count       BIGINT NOT NULL,
    first_seen  BIGINT NOT NULL,
    last_seen   BIGINT NOT NULL
);
CREATE INDEX groups_last_seen ON groups (last_seen);

CREATE TABLE incidents (
    id          BIGSERIAL PRIMARY KEY,
    created_at  BIGINT NOT NULL,
    group_id    BIGINT REFERENCES groups (id),
    log_hash    TEXT NOT NULL REFERENCES logs (hash),
    project     TEXT,
    source      TEXT,
    commit_sha  TEXT,
    job_url     TEXT,
    tags        TEXT NOT NULL,
    class       TEXT,
    rule        TEXT,
    confidence  TEXT,
    title       TEXT,
    summary     TEXT,
    evidence    TEXT,
    lines       BIGINT NOT NULL,
    diagnosis   BYTEA NOT NULL,
    search      TSVECTOR GENERATED ALWAYS AS (
        to_tsvector('simple', coalesce(title, '') || ' ' || coalesce(summary, '') || ' ' ||
                              coalesce(evidence, '') || ' ' || coalesce(project, ''))
    ) STORED
);
CREATE INDEX incidents_created ON incidents (created_at);
CREATE INDEX incidents_group ON incidents (group_id, created_at);
CREATE INDEX incidents_class ON incidents (class, created_at);
CREATE INDEX incidents_rule ON incidents (rule, created_at);
CREATE INDEX incidents_project ON incidents (project, created_at);
CREATE INDEX incidents_search ON incidents USING GIN (search);

CREATE TABLE incident_rules (
    incident_id BIGINT NOT NULL REFERENCES incidents (id),
    rule        TEXT NOT NULL,
    role        TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (incident_id, rule)
);
CREATE INDEX incident_rules_rule ON incident_rules (rule, created_at);

CREATE TABLE feedback (
    id          BIGSERIAL PRIMARY KEY,
    incident_id BIGINT NOT NULL REFERENCES incidents (id),
    rule        TEXT,
    verdict     TEXT,
    fix_worked  BIGINT,
    comment     TEXT,
    author      TEXT,
    created_at  BIGINT NOT NULL
);
CREATE INDEX feedback_incident ON feedback (incident_id);
CREATE INDEX feedback_rule ON feedback (rule);

CREATE TABLE notes (
    id          BIGSERIAL PRIMARY KEY,
    group_id    BIGINT NOT NULL REFERENCES groups (id),
    body        TEXT NOT NULL,
    author      TEXT,
    created_at  BIGINT NOT NULL
);
CREATE INDEX notes_group ON notes (group_id);

CREATE TABLE api_tokens (
    id           BIGSERIAL PRIMARY KEY,
    name         TEXT NOT NULL UNIQUE,
    hash         TEXT NOT NULL UNIQUE,
    created_at   BIGINT NOT NULL,
    last_used_at BIGINT
);
