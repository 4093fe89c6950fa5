-- Lean storage for large lists (issue 13): at most 250 bytes per imported subscriber.
-- Layout and figures: docs/performance.md, "Storage per subscriber".
--
-- 1. subscribers keeps every column it had, with the same meanings, but stores only one
--    timestamp per row while nothing has changed: `subscribed_at` and `updated_at` are
--    generated (virtual, so they take no space) from `created_at` and two columns that stay
--    NULL until the subscriber is resubscribed (`resubscribed_at`) or changed (`changed_at`).
--    Read subscribed_at and updated_at as before; write resubscribed_at and changed_at.
-- 2. subscriber_tags is WITHOUT ROWID: its primary key (subscriber_id, tag) is the table, so a
--    tag costs two b-tree entries (the key and the tag index) instead of three.
-- 3. events are recorded only when a webhook subscription wants them (docs/webhooks.md), so
--    the events no delivery refers to can never be delivered: they are deleted here. The
--    index by newsletter had no reader; the prune job (jobs/prune_webhook_log.rs) finds old
--    events by time and the deliveries of an event by event_id.
--
-- The migration runner turns foreign keys off meanwhile, so dropping the old tables cascades
-- nowhere, and checks them before committing.

CREATE TABLE subscribers_rebuilt (
    id              INTEGER PRIMARY KEY,
    newsletter_id   INTEGER NOT NULL REFERENCES newsletters(id) ON DELETE CASCADE,
    email           TEXT NOT NULL,
    name            TEXT,
    -- Written without IN: SQLite builds a temporary b-tree for an IN list on every insert.
    status          TEXT NOT NULL DEFAULT 'active'
                    CHECK (status = 'active' OR status = 'unsubscribed' OR status = 'bounced'),
    unsubscribed_at TEXT,
    created_at      TEXT NOT NULL,
    -- When the subscriber last became active again after leaving; NULL: since created_at.
    resubscribed_at TEXT,
    -- When anything last changed; NULL: nothing since created_at.
    changed_at      TEXT,
    subscribed_at   TEXT GENERATED ALWAYS AS (coalesce(resubscribed_at, created_at)) VIRTUAL,
    updated_at      TEXT GENERATED ALWAYS AS (coalesce(changed_at, created_at)) VIRTUAL,
    UNIQUE (newsletter_id, email)
);
INSERT INTO subscribers_rebuilt (id, newsletter_id, email, name, status, unsubscribed_at,
        created_at, resubscribed_at, changed_at)
    SELECT id, newsletter_id, email, name, status, unsubscribed_at, created_at,
        nullif(subscribed_at, created_at), nullif(updated_at, created_at)
    FROM subscribers;
DROP TABLE subscribers;
ALTER TABLE subscribers_rebuilt RENAME TO subscribers;
CREATE INDEX subscribers_list ON subscribers(newsletter_id, status, id);

CREATE TABLE subscriber_tags_rebuilt (
    subscriber_id INTEGER NOT NULL REFERENCES subscribers(id) ON DELETE CASCADE,
    tag           TEXT NOT NULL,
    PRIMARY KEY (subscriber_id, tag)
) WITHOUT ROWID;
INSERT INTO subscriber_tags_rebuilt (subscriber_id, tag)
    SELECT subscriber_id, tag FROM subscriber_tags ORDER BY subscriber_id, tag;
DROP TABLE subscriber_tags;
ALTER TABLE subscriber_tags_rebuilt RENAME TO subscriber_tags;
CREATE INDEX subscriber_tags_tag ON subscriber_tags(tag, subscriber_id);

DROP INDEX events_newsletter;
CREATE INDEX events_created ON events(created_at);
CREATE INDEX webhook_deliveries_event ON webhook_deliveries(event_id);
-- Finished deliveries by age, for the prune job.
CREATE INDEX webhook_deliveries_state ON webhook_deliveries(state, updated_at);
DELETE FROM events
    WHERE NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = events.id);
