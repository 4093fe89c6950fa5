-- Counters and rollups kept by triggers in the transaction of every change, so that every
-- figure a page or the API shows is read from a handful of rows instead of counted over the
-- subscribers and deliveries (issue 13: a million subscribers, ten million deliveries).
-- Whatever door makes a change (API, dashboard, public site, tracking, bounces, import, send),
-- the triggers below see it. docs/statistics.md says what each figure means.
--
-- A later migration that rebuilds `subscribers`, `subscriber_tags`, `deliveries`, `issues` or
-- `newsletters` drops their triggers with the old table: it must create them again.
--
-- Days are UTC days, `YYYY-MM-DD`, the first ten characters of the stored timestamps.

-- Subscribers of each newsletter by status.
CREATE TABLE subscriber_totals (
    newsletter_id INTEGER PRIMARY KEY REFERENCES newsletters(id) ON DELETE CASCADE,
    active        INTEGER NOT NULL DEFAULT 0,
    unsubscribed  INTEGER NOT NULL DEFAULT 0,
    bounced       INTEGER NOT NULL DEFAULT 0
);

-- Subscribers by status in each block of 1,024 ids (`id >> 10`): page N of the newest-first
-- list finds the block it starts in by summing these, newest block first (about a thousand
-- rows for a million subscribers), instead of skipping N pages of rows.
CREATE TABLE subscriber_blocks (
    newsletter_id INTEGER NOT NULL REFERENCES newsletters(id) ON DELETE CASCADE,
    block         INTEGER NOT NULL,
    active        INTEGER NOT NULL DEFAULT 0,
    unsubscribed  INTEGER NOT NULL DEFAULT 0,
    bounced       INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (newsletter_id, block)
) WITHOUT ROWID;

-- Subscribers carrying each tag, any status; a tag nobody carries has no row.
CREATE TABLE tag_counts (
    newsletter_id INTEGER NOT NULL REFERENCES newsletters(id) ON DELETE CASCADE,
    tag           TEXT NOT NULL,
    subscribers   INTEGER NOT NULL,
    PRIMARY KEY (newsletter_id, tag)
) WITHOUT ROWID;

-- One row per newsletter and UTC day on which something was counted.
--   created, unsubscribed: subscribers (as they are now) whose created_at / unsubscribed_at
--     falls on the day: the growth figure.
--   active_change: how the number of active subscribers changed that day (joins and returns
--     minus unsubscribes, bounces and deletions of active subscribers): the growth chart.
--   sent, unconfirmed: deliveries whose sent_at falls on the day, by whether the relay
--     confirmed them (`unconfirmed`) or not (every other status with a sent_at).
--   opened, clicked: deliveries first opened / first clicked that day.
CREATE TABLE newsletter_days (
    newsletter_id INTEGER NOT NULL REFERENCES newsletters(id) ON DELETE CASCADE,
    day           TEXT NOT NULL,
    created       INTEGER NOT NULL DEFAULT 0,
    unsubscribed  INTEGER NOT NULL DEFAULT 0,
    active_change INTEGER NOT NULL DEFAULT 0,
    sent          INTEGER NOT NULL DEFAULT 0,
    unconfirmed   INTEGER NOT NULL DEFAULT 0,
    opened        INTEGER NOT NULL DEFAULT 0,
    clicked       INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (newsletter_id, day)
) WITHOUT ROWID;

-- Deliveries of each issue by status; `remaining` is pending or in flight (`sending`), so
-- claiming a message changes no counter. opened / clicked count delivered (`sent`) messages
-- opened / clicked at least once, as the rates do; unsubscribed counts unsubscribe links used.
CREATE TABLE issue_counts (
    issue_id     INTEGER PRIMARY KEY REFERENCES issues(id) ON DELETE CASCADE,
    total        INTEGER NOT NULL DEFAULT 0,
    remaining    INTEGER NOT NULL DEFAULT 0,
    sent         INTEGER NOT NULL DEFAULT 0,
    unconfirmed  INTEGER NOT NULL DEFAULT 0,
    bounced      INTEGER NOT NULL DEFAULT 0,
    failed       INTEGER NOT NULL DEFAULT 0,
    opened       INTEGER NOT NULL DEFAULT 0,
    clicked      INTEGER NOT NULL DEFAULT 0,
    unsubscribed INTEGER NOT NULL DEFAULT 0
);

-- Backfill from the rows as they are.

INSERT INTO subscriber_totals (newsletter_id, active, unsubscribed, bounced)
SELECT n.id, coalesce(sum(s.status = 'active'), 0), coalesce(sum(s.status = 'unsubscribed'), 0),
       coalesce(sum(s.status = 'bounced'), 0)
FROM newsletters n LEFT JOIN subscribers s ON s.newsletter_id = n.id
GROUP BY n.id;

INSERT INTO subscriber_blocks (newsletter_id, block, active, unsubscribed, bounced)
SELECT newsletter_id, id >> 10, sum(status = 'active'), sum(status = 'unsubscribed'), sum(status = 'bounced')
FROM subscribers GROUP BY newsletter_id, id >> 10;

INSERT INTO tag_counts (newsletter_id, tag, subscribers)
SELECT s.newsletter_id, t.tag, count(*)
FROM subscriber_tags t JOIN subscribers s ON s.id = t.subscriber_id
GROUP BY s.newsletter_id, t.tag;

-- The history of active subscribers before this migration is rebuilt from the rows, as the
-- growth chart did until now: each subscriber joined on its subscribed_at and, unless
-- active, left on its unsubscribed_at, or the bounce of its latest bounced delivery, or its
-- last update when neither is known.
INSERT INTO newsletter_days (newsletter_id, day, created, unsubscribed, active_change, sent, unconfirmed, opened, clicked)
SELECT newsletter_id, day, sum(created), sum(unsubscribed), sum(active_change), sum(sent), sum(unconfirmed),
       sum(opened), sum(clicked)
FROM (
    SELECT newsletter_id, substr(created_at, 1, 10) AS day, 1 AS created, 0 AS unsubscribed,
           0 AS active_change, 0 AS sent, 0 AS unconfirmed, 0 AS opened, 0 AS clicked
    FROM subscribers
    UNION ALL
    SELECT newsletter_id, substr(unsubscribed_at, 1, 10), 0, 1, 0, 0, 0, 0, 0
    FROM subscribers WHERE unsubscribed_at IS NOT NULL
    UNION ALL
    SELECT newsletter_id, substr(subscribed_at, 1, 10), 0, 0, 1, 0, 0, 0, 0
    FROM subscribers
    UNION ALL
    SELECT s.newsletter_id, substr(coalesce(CASE s.status
               WHEN 'unsubscribed' THEN s.unsubscribed_at
               ELSE (SELECT max(d.bounced_at) FROM deliveries d WHERE d.subscriber_id = s.id)
           END, s.updated_at), 1, 10), 0, 0, -1, 0, 0, 0, 0
    FROM subscribers s WHERE s.status != 'active'
    UNION ALL
    SELECT i.newsletter_id, substr(d.sent_at, 1, 10), 0, 0, 0, d.status != 'unconfirmed', d.status = 'unconfirmed', 0, 0
    FROM deliveries d JOIN issues i ON i.id = d.issue_id WHERE d.sent_at IS NOT NULL
    UNION ALL
    SELECT i.newsletter_id, substr(d.opened_at, 1, 10), 0, 0, 0, 0, 0, 1, 0
    FROM deliveries d JOIN issues i ON i.id = d.issue_id WHERE d.opened_at IS NOT NULL
    UNION ALL
    SELECT i.newsletter_id, substr(d.clicked_at, 1, 10), 0, 0, 0, 0, 0, 0, 1
    FROM deliveries d JOIN issues i ON i.id = d.issue_id WHERE d.clicked_at IS NOT NULL
)
GROUP BY newsletter_id, day;

INSERT INTO issue_counts (issue_id, total, remaining, sent, unconfirmed, bounced, failed, opened, clicked, unsubscribed)
SELECT i.id, count(d.id), coalesce(sum(d.status IN ('pending', 'sending')), 0),
       coalesce(sum(d.status = 'sent'), 0), coalesce(sum(d.status = 'unconfirmed'), 0),
       coalesce(sum(d.status = 'bounced'), 0), coalesce(sum(d.status = 'failed'), 0),
       coalesce(sum(d.status = 'sent' AND d.opened_at IS NOT NULL), 0),
       coalesce(sum(d.status = 'sent' AND d.clicked_at IS NOT NULL), 0),
       coalesce(sum(d.unsubscribed_at IS NOT NULL), 0)
FROM issues i LEFT JOIN deliveries d ON d.issue_id = i.id
GROUP BY i.id;

-- Newsletters and issues get their counter row when created, so the triggers below only
-- update it.

CREATE TRIGGER newsletters_counted AFTER INSERT ON newsletters BEGIN
    INSERT INTO subscriber_totals (newsletter_id) VALUES (NEW.id);
END;

CREATE TRIGGER issues_counted AFTER INSERT ON issues BEGIN
    INSERT INTO issue_counts (issue_id) VALUES (NEW.id);
END;

-- An issue's deliveries go first (rather than by the foreign key's cascade, which runs after
-- the issue is gone), so their triggers still find the issue's newsletter.
CREATE TRIGGER issues_deliveries_removed BEFORE DELETE ON issues BEGIN
    DELETE FROM deliveries WHERE issue_id = OLD.id;
END;

-- Subscribers.

-- A new subscriber joins on the day it was created, if active (a row written already
-- unsubscribed or bounced, as a restore could, was never active here; its unsubscribed_at
-- still counts on its day). One trigger program per insert: an import runs this a million
-- times.
CREATE TRIGGER subscribers_counted AFTER INSERT ON subscribers BEGIN
    UPDATE subscriber_totals SET active = active + (NEW.status = 'active'),
        unsubscribed = unsubscribed + (NEW.status = 'unsubscribed'), bounced = bounced + (NEW.status = 'bounced')
    WHERE newsletter_id = NEW.newsletter_id;
    INSERT INTO subscriber_blocks (newsletter_id, block, active, unsubscribed, bounced)
    VALUES (NEW.newsletter_id, NEW.id >> 10, NEW.status = 'active', NEW.status = 'unsubscribed', NEW.status = 'bounced')
    ON CONFLICT DO UPDATE SET active = active + excluded.active,
        unsubscribed = unsubscribed + excluded.unsubscribed, bounced = bounced + excluded.bounced;
    INSERT INTO newsletter_days (newsletter_id, day, created, active_change)
    VALUES (NEW.newsletter_id, substr(NEW.created_at, 1, 10), 1, NEW.status = 'active')
    ON CONFLICT DO UPDATE SET created = created + 1, active_change = active_change + excluded.active_change;
    INSERT INTO newsletter_days (newsletter_id, day, unsubscribed)
    SELECT NEW.newsletter_id, substr(NEW.unsubscribed_at, 1, 10), 1
    WHERE NEW.unsubscribed_at IS NOT NULL
    ON CONFLICT DO UPDATE SET unsubscribed = unsubscribed + 1;
END;

-- A change of status moves the subscriber between the counters; into or out of `active`, it
-- counts on the day of the change (the row's new updated_at, or now when that did not move).
CREATE TRIGGER subscribers_status_counted AFTER UPDATE OF status ON subscribers
WHEN OLD.status IS NOT NEW.status
BEGIN
    UPDATE subscriber_totals SET
        active = active + (NEW.status = 'active') - (OLD.status = 'active'),
        unsubscribed = unsubscribed + (NEW.status = 'unsubscribed') - (OLD.status = 'unsubscribed'),
        bounced = bounced + (NEW.status = 'bounced') - (OLD.status = 'bounced')
    WHERE newsletter_id = NEW.newsletter_id;
    UPDATE subscriber_blocks SET
        active = active + (NEW.status = 'active') - (OLD.status = 'active'),
        unsubscribed = unsubscribed + (NEW.status = 'unsubscribed') - (OLD.status = 'unsubscribed'),
        bounced = bounced + (NEW.status = 'bounced') - (OLD.status = 'bounced')
    WHERE newsletter_id = NEW.newsletter_id AND block = NEW.id >> 10;
    INSERT INTO newsletter_days (newsletter_id, day, active_change)
    SELECT NEW.newsletter_id,
           substr(coalesce(nullif(NEW.updated_at, OLD.updated_at), strftime('%Y-%m-%dT%H:%M:%fZ', 'now')), 1, 10),
           (NEW.status = 'active') - (OLD.status = 'active')
    WHERE (NEW.status = 'active') != (OLD.status = 'active')
    ON CONFLICT DO UPDATE SET active_change = active_change + excluded.active_change;
END;

CREATE TRIGGER subscribers_created_at_counted AFTER UPDATE OF created_at ON subscribers
WHEN OLD.created_at IS NOT NEW.created_at
BEGIN
    UPDATE newsletter_days SET created = created - 1
    WHERE newsletter_id = OLD.newsletter_id AND day = substr(OLD.created_at, 1, 10);
    INSERT INTO newsletter_days (newsletter_id, day, created)
    VALUES (NEW.newsletter_id, substr(NEW.created_at, 1, 10), 1)
    ON CONFLICT DO UPDATE SET created = created + 1;
END;

CREATE TRIGGER subscribers_unsubscribed_at_counted AFTER UPDATE OF unsubscribed_at ON subscribers
WHEN OLD.unsubscribed_at IS NOT NEW.unsubscribed_at
BEGIN
    UPDATE newsletter_days SET unsubscribed = unsubscribed - 1
    WHERE newsletter_id = OLD.newsletter_id AND day = substr(OLD.unsubscribed_at, 1, 10);
    INSERT INTO newsletter_days (newsletter_id, day, unsubscribed)
    SELECT NEW.newsletter_id, substr(NEW.unsubscribed_at, 1, 10), 1
    WHERE NEW.unsubscribed_at IS NOT NULL
    ON CONFLICT DO UPDATE SET unsubscribed = unsubscribed + 1;
END;

-- Tags go before their subscriber (rather than by the foreign key's cascade, which runs
-- after the subscriber is gone), so their trigger still finds the subscriber's newsletter.
CREATE TRIGGER subscribers_tags_removed BEFORE DELETE ON subscribers BEGIN
    DELETE FROM subscriber_tags WHERE subscriber_id = OLD.id;
END;

-- A deleted subscriber leaves every counter; an active one leaves the active count today.
-- (No row is added for a newsletter being deleted.)
CREATE TRIGGER subscribers_uncounted AFTER DELETE ON subscribers BEGIN
    UPDATE subscriber_totals SET active = active - (OLD.status = 'active'),
        unsubscribed = unsubscribed - (OLD.status = 'unsubscribed'), bounced = bounced - (OLD.status = 'bounced')
    WHERE newsletter_id = OLD.newsletter_id;
    UPDATE subscriber_blocks SET active = active - (OLD.status = 'active'),
        unsubscribed = unsubscribed - (OLD.status = 'unsubscribed'), bounced = bounced - (OLD.status = 'bounced')
    WHERE newsletter_id = OLD.newsletter_id AND block = OLD.id >> 10;
    UPDATE newsletter_days SET created = created - 1
    WHERE newsletter_id = OLD.newsletter_id AND day = substr(OLD.created_at, 1, 10);
    UPDATE newsletter_days SET unsubscribed = unsubscribed - 1
    WHERE newsletter_id = OLD.newsletter_id AND day = substr(OLD.unsubscribed_at, 1, 10);
    INSERT INTO newsletter_days (newsletter_id, day, active_change)
    SELECT OLD.newsletter_id, strftime('%Y-%m-%d', 'now'), -1
    WHERE OLD.status = 'active' AND EXISTS (SELECT 1 FROM newsletters WHERE id = OLD.newsletter_id)
    ON CONFLICT DO UPDATE SET active_change = active_change - 1;
END;

-- Tags.

CREATE TRIGGER subscriber_tags_counted AFTER INSERT ON subscriber_tags BEGIN
    INSERT INTO tag_counts (newsletter_id, tag, subscribers)
    SELECT newsletter_id, NEW.tag, 1 FROM subscribers WHERE id = NEW.subscriber_id
    ON CONFLICT DO UPDATE SET subscribers = subscribers + 1;
END;

CREATE TRIGGER subscriber_tags_uncounted AFTER DELETE ON subscriber_tags BEGIN
    UPDATE tag_counts SET subscribers = subscribers - 1
    WHERE newsletter_id = (SELECT newsletter_id FROM subscribers WHERE id = OLD.subscriber_id) AND tag = OLD.tag;
    DELETE FROM tag_counts
    WHERE newsletter_id = (SELECT newsletter_id FROM subscribers WHERE id = OLD.subscriber_id) AND tag = OLD.tag
        AND subscribers <= 0;
END;

CREATE TRIGGER subscriber_tags_moved AFTER UPDATE OF subscriber_id, tag ON subscriber_tags
WHEN OLD.subscriber_id IS NOT NEW.subscriber_id OR OLD.tag IS NOT NEW.tag
BEGIN
    UPDATE tag_counts SET subscribers = subscribers - 1
    WHERE newsletter_id = (SELECT newsletter_id FROM subscribers WHERE id = OLD.subscriber_id) AND tag = OLD.tag;
    DELETE FROM tag_counts
    WHERE newsletter_id = (SELECT newsletter_id FROM subscribers WHERE id = OLD.subscriber_id) AND tag = OLD.tag
        AND subscribers <= 0;
    INSERT INTO tag_counts (newsletter_id, tag, subscribers)
    SELECT newsletter_id, NEW.tag, 1 FROM subscribers WHERE id = NEW.subscriber_id
    ON CONFLICT DO UPDATE SET subscribers = subscribers + 1;
END;

-- Deliveries. The send's hot path (pending -> sending -> sent) fires one counter update for
-- the issue and one for the day it was sent; claiming a message (pending -> sending) changes
-- no counter (its trigger's WHEN is false).

CREATE TRIGGER deliveries_counted AFTER INSERT ON deliveries BEGIN
    UPDATE issue_counts SET total = total + 1,
        remaining = remaining + (NEW.status IN ('pending', 'sending')),
        sent = sent + (NEW.status = 'sent'), unconfirmed = unconfirmed + (NEW.status = 'unconfirmed'),
        bounced = bounced + (NEW.status = 'bounced'), failed = failed + (NEW.status = 'failed'),
        opened = opened + (NEW.status = 'sent' AND NEW.opened_at IS NOT NULL),
        clicked = clicked + (NEW.status = 'sent' AND NEW.clicked_at IS NOT NULL),
        unsubscribed = unsubscribed + (NEW.unsubscribed_at IS NOT NULL)
    WHERE issue_id = NEW.issue_id;
END;

-- A row written with its history (a fill, a restore): already sent, opened or clicked.
CREATE TRIGGER deliveries_counted_by_day AFTER INSERT ON deliveries
WHEN NEW.sent_at IS NOT NULL OR NEW.opened_at IS NOT NULL OR NEW.clicked_at IS NOT NULL
BEGIN
    INSERT INTO newsletter_days (newsletter_id, day, sent, unconfirmed)
    SELECT newsletter_id, substr(NEW.sent_at, 1, 10), NEW.status != 'unconfirmed', NEW.status = 'unconfirmed'
    FROM issues WHERE id = NEW.issue_id AND NEW.sent_at IS NOT NULL
    ON CONFLICT DO UPDATE SET sent = sent + excluded.sent, unconfirmed = unconfirmed + excluded.unconfirmed;
    INSERT INTO newsletter_days (newsletter_id, day, opened)
    SELECT newsletter_id, substr(NEW.opened_at, 1, 10), 1
    FROM issues WHERE id = NEW.issue_id AND NEW.opened_at IS NOT NULL
    ON CONFLICT DO UPDATE SET opened = opened + 1;
    INSERT INTO newsletter_days (newsletter_id, day, clicked)
    SELECT newsletter_id, substr(NEW.clicked_at, 1, 10), 1
    FROM issues WHERE id = NEW.issue_id AND NEW.clicked_at IS NOT NULL
    ON CONFLICT DO UPDATE SET clicked = clicked + 1;
END;

CREATE TRIGGER deliveries_status_counted AFTER UPDATE OF status, opened_at, clicked_at, unsubscribed_at ON deliveries
WHEN (OLD.status IS NOT NEW.status
        AND NOT (OLD.status IN ('pending', 'sending') AND NEW.status IN ('pending', 'sending')))
    OR (OLD.opened_at IS NULL) != (NEW.opened_at IS NULL)
    OR (OLD.clicked_at IS NULL) != (NEW.clicked_at IS NULL)
    OR (OLD.unsubscribed_at IS NULL) != (NEW.unsubscribed_at IS NULL)
BEGIN
    UPDATE issue_counts SET
        remaining = remaining + (NEW.status IN ('pending', 'sending')) - (OLD.status IN ('pending', 'sending')),
        sent = sent + (NEW.status = 'sent') - (OLD.status = 'sent'),
        unconfirmed = unconfirmed + (NEW.status = 'unconfirmed') - (OLD.status = 'unconfirmed'),
        bounced = bounced + (NEW.status = 'bounced') - (OLD.status = 'bounced'),
        failed = failed + (NEW.status = 'failed') - (OLD.status = 'failed'),
        opened = opened + (NEW.status = 'sent' AND NEW.opened_at IS NOT NULL)
                        - (OLD.status = 'sent' AND OLD.opened_at IS NOT NULL),
        clicked = clicked + (NEW.status = 'sent' AND NEW.clicked_at IS NOT NULL)
                          - (OLD.status = 'sent' AND OLD.clicked_at IS NOT NULL),
        unsubscribed = unsubscribed + (NEW.unsubscribed_at IS NOT NULL) - (OLD.unsubscribed_at IS NOT NULL)
    WHERE issue_id = NEW.issue_id;
    -- A message sent earlier that turns unconfirmed, or stops being so (a later bounce),
    -- moves between its day's two figures.
    UPDATE newsletter_days SET sent = sent + (NEW.status != 'unconfirmed') - (OLD.status != 'unconfirmed'),
        unconfirmed = unconfirmed + (NEW.status = 'unconfirmed') - (OLD.status = 'unconfirmed')
    WHERE NEW.sent_at IS NOT NULL AND OLD.sent_at IS NEW.sent_at
        AND (OLD.status = 'unconfirmed') != (NEW.status = 'unconfirmed')
        AND newsletter_id = (SELECT newsletter_id FROM issues WHERE id = NEW.issue_id)
        AND day = substr(NEW.sent_at, 1, 10);
END;

-- sent_at is set once, when the message went out (or was settled unconfirmed): it counts on
-- that day, as sent or unconfirmed by the status it has then. Only a write of sent_at fires
-- this, so claiming a message (a write of its status alone) fires nothing else.
CREATE TRIGGER deliveries_sent_by_day AFTER UPDATE OF sent_at ON deliveries
WHEN OLD.sent_at IS NOT NEW.sent_at
BEGIN
    UPDATE newsletter_days SET sent = sent - (OLD.status != 'unconfirmed'),
        unconfirmed = unconfirmed - (OLD.status = 'unconfirmed')
    WHERE OLD.sent_at IS NOT NULL
        AND newsletter_id = (SELECT newsletter_id FROM issues WHERE id = OLD.issue_id)
        AND day = substr(OLD.sent_at, 1, 10);
    INSERT INTO newsletter_days (newsletter_id, day, sent, unconfirmed)
    SELECT newsletter_id, substr(NEW.sent_at, 1, 10), NEW.status != 'unconfirmed', NEW.status = 'unconfirmed'
    FROM issues WHERE NEW.sent_at IS NOT NULL AND id = NEW.issue_id
    ON CONFLICT DO UPDATE SET sent = sent + excluded.sent, unconfirmed = unconfirmed + excluded.unconfirmed;
END;

CREATE TRIGGER deliveries_opened_by_day AFTER UPDATE OF opened_at ON deliveries
WHEN OLD.opened_at IS NOT NEW.opened_at
BEGIN
    UPDATE newsletter_days SET opened = opened - 1
    WHERE newsletter_id = (SELECT newsletter_id FROM issues WHERE id = OLD.issue_id)
        AND day = substr(OLD.opened_at, 1, 10);
    INSERT INTO newsletter_days (newsletter_id, day, opened)
    SELECT newsletter_id, substr(NEW.opened_at, 1, 10), 1
    FROM issues WHERE id = NEW.issue_id AND NEW.opened_at IS NOT NULL
    ON CONFLICT DO UPDATE SET opened = opened + 1;
END;

CREATE TRIGGER deliveries_clicked_by_day AFTER UPDATE OF clicked_at ON deliveries
WHEN OLD.clicked_at IS NOT NEW.clicked_at
BEGIN
    UPDATE newsletter_days SET clicked = clicked - 1
    WHERE newsletter_id = (SELECT newsletter_id FROM issues WHERE id = OLD.issue_id)
        AND day = substr(OLD.clicked_at, 1, 10);
    INSERT INTO newsletter_days (newsletter_id, day, clicked)
    SELECT newsletter_id, substr(NEW.clicked_at, 1, 10), 1
    FROM issues WHERE id = NEW.issue_id AND NEW.clicked_at IS NOT NULL
    ON CONFLICT DO UPDATE SET clicked = clicked + 1;
END;

CREATE TRIGGER deliveries_uncounted AFTER DELETE ON deliveries BEGIN
    UPDATE issue_counts SET total = total - 1,
        remaining = remaining - (OLD.status IN ('pending', 'sending')),
        sent = sent - (OLD.status = 'sent'), unconfirmed = unconfirmed - (OLD.status = 'unconfirmed'),
        bounced = bounced - (OLD.status = 'bounced'), failed = failed - (OLD.status = 'failed'),
        opened = opened - (OLD.status = 'sent' AND OLD.opened_at IS NOT NULL),
        clicked = clicked - (OLD.status = 'sent' AND OLD.clicked_at IS NOT NULL),
        unsubscribed = unsubscribed - (OLD.unsubscribed_at IS NOT NULL)
    WHERE issue_id = OLD.issue_id;
    UPDATE newsletter_days SET sent = sent - (OLD.status != 'unconfirmed'),
        unconfirmed = unconfirmed - (OLD.status = 'unconfirmed')
    WHERE newsletter_id = (SELECT newsletter_id FROM issues WHERE id = OLD.issue_id)
        AND day = substr(OLD.sent_at, 1, 10);
    UPDATE newsletter_days SET opened = opened - 1
    WHERE newsletter_id = (SELECT newsletter_id FROM issues WHERE id = OLD.issue_id)
        AND day = substr(OLD.opened_at, 1, 10);
    UPDATE newsletter_days SET clicked = clicked - 1
    WHERE newsletter_id = (SELECT newsletter_id FROM issues WHERE id = OLD.issue_id)
        AND day = substr(OLD.clicked_at, 1, 10);
END;
