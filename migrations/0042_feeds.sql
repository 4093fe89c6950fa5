-- RSS-to-email (docs/automations.md, "Following a feed"): a newsletter follows one feed,
-- polled by the `poll_feeds` job; each new item becomes a draft issue, once.
CREATE TABLE newsletter_feeds (
    newsletter_id  INTEGER PRIMARY KEY REFERENCES newsletters(id) ON DELETE CASCADE,
    url            TEXT NOT NULL,
    -- Minutes between two polls, at least 15.
    every_minutes  INTEGER NOT NULL CHECK (every_minutes >= 15),
    -- The validators of the last answer, sent back as If-None-Match / If-Modified-Since.
    etag           TEXT,
    last_modified  TEXT,
    next_poll_at   TEXT NOT NULL,
    last_polled_at TEXT,
    -- Why the last poll failed (too large, malformed, slow, refused address); NULL when it
    -- worked.
    last_error     TEXT,
    -- 0 until the first poll worked: that poll only records the items already there.
    primed         INTEGER NOT NULL DEFAULT 0,
    created_at     TEXT NOT NULL,
    updated_at     TEXT NOT NULL
);
CREATE INDEX newsletter_feeds_due ON newsletter_feeds(next_poll_at);

-- Every item a newsletter's feed has shown, by its id (else its link): never made twice.
CREATE TABLE feed_items (
    newsletter_id INTEGER NOT NULL REFERENCES newsletters(id) ON DELETE CASCADE,
    item_key      TEXT NOT NULL,
    -- The draft it became; NULL for the items of the first poll (and once deleted).
    issue_id      INTEGER REFERENCES issues(id) ON DELETE SET NULL,
    seen_at       TEXT NOT NULL,
    PRIMARY KEY (newsletter_id, item_key)
) WITHOUT ROWID;
