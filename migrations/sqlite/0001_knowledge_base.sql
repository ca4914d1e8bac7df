-- The knowledge base: logs (content-addressed, compressed), groups of incidents by fingerprint,
-- incidents with their diagnosis, the rules each incident matched, feedback, notes, API tokens.
-- Times are Unix milliseconds.

CREATE TABLE logs (
    hash  TEXT PRIMARY KEY,          -- SHA-256 of the redacted log
    bytes INTEGER NOT NULL,
    lines INTEGER NOT NULL,
    data  BLOB NOT NULL              -- deflate
);

CREATE TABLE groups (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    fingerprint TEXT NOT NULL UNIQUE,
    class       TEXT NOT NULL,
    rule        TEXT NOT NULL,
    title       TEXT NOT NULL,
    message     TEXT NOT NULL,       -- the masked evidence line the fingerprint was made from
    count       INTEGER NOT NULL,
    first_seen  INTEGER NOT NULL,
    last_seen   INTEGER NOT NULL
);
CREATE INDEX groups_last_seen ON groups (last_seen);

CREATE TABLE incidents (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at  INTEGER NOT NULL,
    group_id    INTEGER REFERENCES groups (id),
    log_hash    TEXT NOT NULL REFERENCES logs (hash),
    project     TEXT,
    source      TEXT,
    commit_sha  TEXT,
    job_url     TEXT,
    tags        TEXT NOT NULL,       -- JSON array
    class       TEXT,
    rule        TEXT,
    confidence  TEXT,
    title       TEXT,
    summary     TEXT,
    evidence    TEXT,                -- the primary finding's evidence lines, for search
    lines       INTEGER NOT NULL,
    diagnosis   BLOB NOT NULL        -- deflate of the diagnosis JSON
);
CREATE INDEX incidents_created ON incidents (created_at);
CREATE INDEX incidents_group ON incidents (group_id, created_at);
CREATE INDEX incidents_class ON incidents (class, created_at);
CREATE INDEX incidents_rule ON incidents (rule, created_at);
CREATE INDEX incidents_project ON incidents (project, created_at);

CREATE TABLE incident_rules (
    incident_id INTEGER NOT NULL REFERENCES incidents (id),
    rule        TEXT NOT NULL,
    role        TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (incident_id, rule)
);
CREATE INDEX incident_rules_rule ON incident_rules (rule, created_at);

CREATE TABLE feedback (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    incident_id INTEGER NOT NULL REFERENCES incidents (id),
    rule        TEXT,
    verdict     TEXT,                -- right | wrong
    fix_worked  INTEGER,             -- 1 | 0 | NULL
    comment     TEXT,
    author      TEXT,
    created_at  INTEGER NOT NULL
);
CREATE INDEX feedback_incident ON feedback (incident_id);
CREATE INDEX feedback_rule ON feedback (rule);

CREATE TABLE notes (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    group_id    INTEGER NOT NULL REFERENCES groups (id),
    body        TEXT NOT NULL,
    author      TEXT,
    created_at  INTEGER NOT NULL
);
CREATE INDEX notes_group ON notes (group_id);

CREATE TABLE api_tokens (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    name         TEXT NOT NULL UNIQUE,
    hash         TEXT NOT NULL UNIQUE,   -- SHA-256 of the token; the token itself is never stored
    created_at   INTEGER NOT NULL,
    last_used_at INTEGER
);

-- Full-text search over incidents (rowid = incidents.id); contentless: it only finds ids.
CREATE VIRTUAL TABLE incidents_fts USING fts5 (title, summary, evidence, project, content = '');
