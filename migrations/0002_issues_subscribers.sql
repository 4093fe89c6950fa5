-- Issues with their articles, subscribers with tags, one delivery per recipient of a send,
-- and the event log that webhooks deliver from.

CREATE TABLE issues (
    id               INTEGER PRIMARY KEY,
    newsletter_id    INTEGER NOT NULL REFERENCES newsletters(id) ON DELETE CASCADE,
    subject          TEXT NOT NULL,
    content_markdown TEXT NOT NULL DEFAULT '',
    status           TEXT NOT NULL DEFAULT 'draft'
                     CHECK (status IN ('draft', 'scheduled', 'approved', 'sending', 'sent')),
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
    UNIQUE (newsletter_id, path)
);
CREATE INDEX issues_list ON issues(newsletter_id, status, id);
CREATE INDEX issues_due ON issues(status, scheduled_for);

CREATE TABLE articles (
    id                 INTEGER PRIMARY KEY,
    issue_id           INTEGER NOT NULL REFERENCES issues(id) ON DELETE CASCADE,
    position           INTEGER NOT NULL,
    title              TEXT NOT NULL,
    url                TEXT NOT NULL,
    summarized_article TEXT NOT NULL DEFAULT ''
);
CREATE INDEX articles_issue ON articles(issue_id, position);

CREATE TABLE subscribers (
    id              INTEGER PRIMARY KEY,
    newsletter_id   INTEGER NOT NULL REFERENCES newsletters(id) ON DELETE CASCADE,
    email           TEXT NOT NULL,
    name            TEXT,
    status          TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'unsubscribed', 'bounced')),
    subscribed_at   TEXT NOT NULL,
    unsubscribed_at TEXT,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL,
    UNIQUE (newsletter_id, email)
);
CREATE INDEX subscribers_list ON subscribers(newsletter_id, status, id);

CREATE TABLE subscriber_tags (
    subscriber_id INTEGER NOT NULL REFERENCES subscribers(id) ON DELETE CASCADE,
    tag           TEXT NOT NULL,
    PRIMARY KEY (subscriber_id, tag)
);
CREATE INDEX subscriber_tags_tag ON subscriber_tags(tag, subscriber_id);

-- One row per recipient of a send, created before anything is sent: the unique key is what
-- makes a resumed send skip those already done.
CREATE TABLE deliveries (
    id              INTEGER PRIMARY KEY,
    issue_id        INTEGER NOT NULL REFERENCES issues(id) ON DELETE CASCADE,
    subscriber_id   INTEGER REFERENCES subscribers(id) ON DELETE SET NULL,
    email           TEXT NOT NULL,
    -- pending -> sending (durably marked just before the SMTP transaction) -> sent | bounced |
    -- failed; a temporary failure goes back to pending with next_attempt_at.
    status          TEXT NOT NULL DEFAULT 'pending'
                    CHECK (status IN ('pending', 'sending', 'sent', 'bounced', 'failed')),
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
CREATE INDEX deliveries_work ON deliveries(issue_id, status, id);
CREATE INDEX deliveries_subscriber ON deliveries(subscriber_id);

-- Every webhook-worthy change, recorded in the transaction that made it.
CREATE TABLE events (
    id            INTEGER PRIMARY KEY,
    newsletter_id INTEGER NOT NULL REFERENCES newsletters(id) ON DELETE CASCADE,
    kind          TEXT NOT NULL,
    payload       TEXT NOT NULL,
    created_at    TEXT NOT NULL
);
CREATE INDEX events_newsletter ON events(newsletter_id, id);
