-- Per-issue reports kept at write time, so reading one is a handful of rows whatever the
-- number of deliveries (docs/statistics.md, "Issue reports"): the clicks of each link and
-- the opens and clicks of each of the first seven days after the send. The tracking routes
-- update them in the transaction that records the open or click
-- (`domain::delivery::tracking`); deleting an issue deletes its rows by cascade.
--
-- Also: tag counts of active subscribers, kept by triggers beside the any-status count of
-- 0011 (which paging and the "no subscriber has this tag" check still read).

-- The links of an issue that were clicked: every click of a tracked link to `url` from one of
-- the issue's deliveries (`clicks`), and the deliveries that clicked it at least once
-- (`clickers`, each counted once through `link_clickers`).
CREATE TABLE issue_links (
    id       INTEGER PRIMARY KEY,
    issue_id INTEGER NOT NULL REFERENCES issues(id) ON DELETE CASCADE,
    url      TEXT NOT NULL,
    clickers INTEGER NOT NULL DEFAULT 0,
    clicks   INTEGER NOT NULL DEFAULT 0,
    UNIQUE (issue_id, url)
);

-- Who clicked a link, so a second click of the same recipient counts in `clicks` only.
-- (No personal data: a delivery id; a deleted subscriber's deliveries stay, without address.)
CREATE TABLE link_clickers (
    link_id     INTEGER NOT NULL REFERENCES issue_links(id) ON DELETE CASCADE,
    delivery_id INTEGER NOT NULL,
    PRIMARY KEY (link_id, delivery_id)
) WITHOUT ROWID;

-- The first seven days after an issue was sent, each 24 hours counted from when the
-- recipient's message went out (the delivery's `sent_at`; day 0 is its first 24 hours, so a
-- send that takes hours still puts every reader's first day in day 0): recipients who first
-- opened (`opened`) and first clicked (`clicked`) in it, and every click of a tracked link
-- (`clicks`). Later events count in the issue's totals and its links but in no day.
CREATE TABLE issue_days (
    issue_id INTEGER NOT NULL REFERENCES issues(id) ON DELETE CASCADE,
    day      INTEGER NOT NULL CHECK (day BETWEEN 0 AND 6),
    opened   INTEGER NOT NULL DEFAULT 0,
    clicked  INTEGER NOT NULL DEFAULT 0,
    clicks   INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (issue_id, day)
) WITHOUT ROWID;

-- Backfill. The first open and first click of every delivery are stored (`opened_at`,
-- `clicked_at`), so the days are rebuilt exactly for `opened` and `clicked`; before this
-- migration only first clicks were kept, so a day's `clicks` starts as its first clicks.
-- One pass over the deliveries that were opened (no index: this runs once, before the server
-- starts, like 0011's backfill).
INSERT INTO issue_days (issue_id, day, opened, clicked, clicks)
SELECT issue_id, day, sum(opened), sum(clicked), sum(clicked)
FROM (
    SELECT d.issue_id,
           max(0, CAST(julianday(d.opened_at) - julianday(d.sent_at) AS INTEGER)) AS day,
           1 AS opened, 0 AS clicked
    FROM deliveries d
    WHERE d.opened_at IS NOT NULL AND d.sent_at IS NOT NULL
    UNION ALL
    SELECT d.issue_id,
           max(0, CAST(julianday(d.clicked_at) - julianday(d.sent_at) AS INTEGER)), 0, 1
    FROM deliveries d
    WHERE d.clicked_at IS NOT NULL AND d.sent_at IS NOT NULL
)
WHERE day <= 6
GROUP BY issue_id, day;

-- Which link was clicked was only written in the `email.clicked` event of a first click, and
-- events are kept 30 days: the links are rebuilt from the events still there (one each per
-- recipient, so clickers = clicks). Older clicks count in the issue's totals only.
INSERT INTO issue_links (issue_id, url, clickers, clicks)
SELECT i.id, e.payload ->> '$.data.clicked_url', count(*), count(*)
FROM events e JOIN issues i ON i.id = e.payload ->> '$.data.issue_id'
WHERE e.kind = 'email.clicked' AND e.payload ->> '$.data.clicked_url' IS NOT NULL
    AND i.newsletter_id = e.newsletter_id
GROUP BY i.id, e.payload ->> '$.data.clicked_url';

INSERT OR IGNORE INTO link_clickers (link_id, delivery_id)
SELECT l.id, e.payload ->> '$.data.delivery_id'
FROM events e JOIN issue_links l ON l.issue_id = e.payload ->> '$.data.issue_id'
    AND l.url = e.payload ->> '$.data.clicked_url'
WHERE e.kind = 'email.clicked' AND e.payload ->> '$.data.delivery_id' IS NOT NULL;

-- Tags: how many of each tag's subscribers are active. The send page and the subscriber list
-- show this figure ("452 active"), as a tagged send goes to active subscribers only.
ALTER TABLE tag_counts ADD COLUMN active INTEGER NOT NULL DEFAULT 0;

UPDATE tag_counts SET active = (
    SELECT count(*) FROM subscriber_tags t JOIN subscribers s ON s.id = t.subscriber_id
    WHERE s.newsletter_id = tag_counts.newsletter_id AND t.tag = tag_counts.tag AND s.status = 'active'
);

DROP TRIGGER subscriber_tags_counted;
DROP TRIGGER subscriber_tags_uncounted;
DROP TRIGGER subscriber_tags_moved;

CREATE TRIGGER subscriber_tags_counted AFTER INSERT ON subscriber_tags BEGIN
    INSERT INTO tag_counts (newsletter_id, tag, subscribers, active)
    SELECT newsletter_id, NEW.tag, 1, status = 'active' FROM subscribers WHERE id = NEW.subscriber_id
    ON CONFLICT DO UPDATE SET subscribers = subscribers + 1, active = active + excluded.active;
END;

CREATE TRIGGER subscriber_tags_uncounted AFTER DELETE ON subscriber_tags BEGIN
    UPDATE tag_counts SET subscribers = subscribers - 1,
        active = active - coalesce((SELECT status = 'active' FROM subscribers WHERE id = OLD.subscriber_id), 0)
    WHERE newsletter_id = (SELECT newsletter_id FROM subscribers WHERE id = OLD.subscriber_id) AND tag = OLD.tag;
    DELETE FROM tag_counts
    WHERE newsletter_id = (SELECT newsletter_id FROM subscribers WHERE id = OLD.subscriber_id) AND tag = OLD.tag
        AND subscribers <= 0;
END;

CREATE TRIGGER subscriber_tags_moved AFTER UPDATE OF subscriber_id, tag ON subscriber_tags
WHEN OLD.subscriber_id IS NOT NEW.subscriber_id OR OLD.tag IS NOT NEW.tag
BEGIN
    UPDATE tag_counts SET subscribers = subscribers - 1,
        active = active - coalesce((SELECT status = 'active' FROM subscribers WHERE id = OLD.subscriber_id), 0)
    WHERE newsletter_id = (SELECT newsletter_id FROM subscribers WHERE id = OLD.subscriber_id) AND tag = OLD.tag;
    DELETE FROM tag_counts
    WHERE newsletter_id = (SELECT newsletter_id FROM subscribers WHERE id = OLD.subscriber_id) AND tag = OLD.tag
        AND subscribers <= 0;
    INSERT INTO tag_counts (newsletter_id, tag, subscribers, active)
    SELECT newsletter_id, NEW.tag, 1, status = 'active' FROM subscribers WHERE id = NEW.subscriber_id
    ON CONFLICT DO UPDATE SET subscribers = subscribers + 1, active = active + excluded.active;
END;

-- A subscriber moving into or out of `active` moves each of its tags' active count (its own
-- few tag rows, through the primary key of subscriber_tags).
CREATE TRIGGER subscribers_tags_active_counted AFTER UPDATE OF status ON subscribers
WHEN (OLD.status = 'active') != (NEW.status = 'active')
BEGIN
    UPDATE tag_counts SET active = active + (NEW.status = 'active') - (OLD.status = 'active')
    WHERE newsletter_id = NEW.newsletter_id
        AND tag IN (SELECT tag FROM subscriber_tags WHERE subscriber_id = NEW.id);
END;
