-- Secrets the servers of one knowledge base share, created once by the first server that needs
-- them: the key that signs the pages' CSRF tokens (so that a form served by one server is taken
-- by another, and a token the server did not make is refused).
CREATE TABLE server_secrets (
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
