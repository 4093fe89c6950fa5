-- A send that keeps its promise when things fail.
--
-- deliveries gain the status 'unconfirmed': the end of the message went out but the relay's
-- answer never came (a crash, a timeout, a dropped connection), so the relay may have taken
-- it; it is never sent again and is counted apart from 'sent'.
-- issues gain the status 'failed': the mail relay stayed unreachable longer than the send's
-- outage limit; the owner resumes the send once the relay works. `relay_down_since` is when
-- the relay became unreachable during this send (NULL while it answers) and
-- `send_resumes_at` when the waiting send tries again.
--
-- SQLite cannot change a CHECK constraint in place, so both tables are rebuilt with the same
-- columns, keys and indexes (the migration runner turns foreign keys off meanwhile, so
-- dropping the old table cascades nowhere, and checks them before committing).

CREATE TABLE issues_rebuilt (
    id               INTEGER PRIMARY KEY,
    newsletter_id    INTEGER NOT NULL REFERENCES newsletters(id) ON DELETE CASCADE,
    subject          TEXT NOT NULL,
    content_markdown TEXT NOT NULL DEFAULT '',
    status           TEXT NOT NULL DEFAULT 'draft'
                     CHECK (status IN ('draft', 'scheduled', 'approved', 'sending', 'sent', 'failed')),
    scheduled_for    TEXT,
    sent_at          TEXT,
    -- Slug of the subject for /p/<path>; follows the subject until the issue is published.
    path             TEXT NOT NULL,
    published_at     TEXT,
    last_error       TEXT,
    -- Set once the recipients of a send are recorded (one delivery row each).
    recipients_at    TEXT,
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL,
    relay_down_since TEXT,
    send_resumes_at  TEXT,
    UNIQUE (newsletter_id, path)
);
INSERT INTO issues_rebuilt (id, newsletter_id, subject, content_markdown, status, scheduled_for,
        sent_at, path, published_at, last_error, recipients_at, created_at, updated_at)
    SELECT id, newsletter_id, subject, content_markdown, status, scheduled_for,
        sent_at, path, published_at, last_error, recipients_at, created_at, updated_at
    FROM issues;
DROP TABLE issues;
ALTER TABLE issues_rebuilt RENAME TO issues;
CREATE INDEX issues_list ON issues(newsletter_id, status, id);
CREATE INDEX issues_due ON issues(status, scheduled_for);

CREATE TABLE deliveries_rebuilt (
    id              INTEGER PRIMARY KEY,
    issue_id        INTEGER NOT NULL REFERENCES issues(id) ON DELETE CASCADE,
    subscriber_id   INTEGER REFERENCES subscribers(id) ON DELETE SET NULL,
    email           TEXT NOT NULL,
    -- pending -> sending (durably marked just before the end-of-data mark) -> sent |
    -- unconfirmed | bounced | failed; a temporary failure goes back to pending with
    -- next_attempt_at.
    status          TEXT NOT NULL DEFAULT 'pending'
                    CHECK (status IN ('pending', 'sending', 'sent', 'unconfirmed', 'bounced', 'failed')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at TEXT,
    last_error      TEXT,
    sent_at         TEXT,
    opened_at       TEXT,
    clicked_at      TEXT,
    bounced_at      TEXT,
    unsubscribed_at TEXT,
    created_at      TEXT NOT NULL,
    UNIQUE (issue_id, subscriber_id)
);
INSERT INTO deliveries_rebuilt SELECT id, issue_id, subscriber_id, email, status, attempts,
        next_attempt_at, last_error, sent_at, opened_at, clicked_at, bounced_at,
        unsubscribed_at, created_at
    FROM deliveries;
DROP TABLE deliveries;
ALTER TABLE deliveries_rebuilt RENAME TO deliveries;
CREATE INDEX deliveries_work ON deliveries(issue_id, status, id);
CREATE INDEX deliveries_subscriber ON deliveries(subscriber_id);
