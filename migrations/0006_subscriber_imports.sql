-- CSV imports started from the dashboard. The uploaded file is kept under
-- <data-dir>/imports/<stored_name> until the import finishes; a job imports it in batches
-- and records its progress here in each batch's transaction, so a restart resumes exactly
-- where the last committed batch ended.

CREATE TABLE subscriber_imports (
    id            INTEGER PRIMARY KEY,
    newsletter_id INTEGER NOT NULL REFERENCES newsletters(id) ON DELETE CASCADE,
    -- The name the owner's browser sent, shown on the pages.
    file_name     TEXT NOT NULL,
    -- The file under <data-dir>/imports/, named by the server.
    stored_name   TEXT NOT NULL UNIQUE,
    size_bytes    INTEGER NOT NULL,
    -- uploaded (previewed, waiting for the owner) -> queued -> running -> done | failed
    state         TEXT NOT NULL DEFAULT 'uploaded'
                  CHECK (state IN ('uploaded', 'queued', 'running', 'done', 'failed')),
    rows_done     INTEGER NOT NULL DEFAULT 0,
    bytes_done    INTEGER NOT NULL DEFAULT 0,
    created       INTEGER NOT NULL DEFAULT 0,
    existing      INTEGER NOT NULL DEFAULT 0,
    skipped       INTEGER NOT NULL DEFAULT 0,
    error_count   INTEGER NOT NULL DEFAULT 0,
    failure       TEXT,
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL,
    finished_at   TEXT
);
CREATE INDEX subscriber_imports_newsletter ON subscriber_imports(newsletter_id, id);

-- The first refused rows of an import (line, address, reason); later ones are only counted.
CREATE TABLE subscriber_import_errors (
    import_id INTEGER NOT NULL REFERENCES subscriber_imports(id) ON DELETE CASCADE,
    line      INTEGER NOT NULL,
    email     TEXT NOT NULL,
    reason    TEXT NOT NULL,
    PRIMARY KEY (import_id, line)
);
