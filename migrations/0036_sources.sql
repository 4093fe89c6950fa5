-- Where each subscriber came from (docs/growth.md, "Where readers came from"): the way they
-- were added, the page they came from and the campaign tags of its address, kept on the row;
-- and new subscribers by source and UTC day, kept by triggers as newsletter_days is
-- (migration 0011), so the stats read at most 30 days × 4 sources of rows.

-- `form` (a signup form or the site's subscribe page, once confirmed), `import` (a CSV
-- import), `api` (a create through the API) or `dashboard` (added by hand). NULL for the
-- subscribers made before this migration: nobody recorded it.
ALTER TABLE subscribers ADD COLUMN source TEXT;
-- The page the reader subscribed from, when the browser told (`http(s)://…`, at most 300
-- characters).
ALTER TABLE subscribers ADD COLUMN referrer TEXT;
-- `utm_source`, `utm_medium` and `utm_campaign` of the page's address, when present (one line
-- each, at most 100 characters).
ALTER TABLE subscribers ADD COLUMN utm_source TEXT;
ALTER TABLE subscribers ADD COLUMN utm_medium TEXT;
ALTER TABLE subscribers ADD COLUMN utm_campaign TEXT;

-- The same, carried by a pending confirmation until it is confirmed.
ALTER TABLE subscription_requests ADD COLUMN referrer TEXT;
ALTER TABLE subscription_requests ADD COLUMN utm_source TEXT;
ALTER TABLE subscription_requests ADD COLUMN utm_medium TEXT;
ALTER TABLE subscription_requests ADD COLUMN utm_campaign TEXT;

-- Subscribers (as they are now) whose created_at falls on the day, by source.
CREATE TABLE newsletter_source_days (
    newsletter_id INTEGER NOT NULL REFERENCES newsletters(id) ON DELETE CASCADE,
    day           TEXT NOT NULL,
    source        TEXT NOT NULL,
    created       INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (newsletter_id, day, source)
) WITHOUT ROWID;

CREATE TRIGGER subscribers_source_counted AFTER INSERT ON subscribers
WHEN NEW.source IS NOT NULL
BEGIN
    INSERT INTO newsletter_source_days (newsletter_id, day, source, created)
    VALUES (NEW.newsletter_id, substr(NEW.created_at, 1, 10), NEW.source, 1)
    ON CONFLICT DO UPDATE SET created = created + 1;
END;

CREATE TRIGGER subscribers_source_moved AFTER UPDATE OF created_at, source ON subscribers
WHEN OLD.created_at IS NOT NEW.created_at OR OLD.source IS NOT NEW.source
BEGIN
    UPDATE newsletter_source_days SET created = created - 1
    WHERE newsletter_id = OLD.newsletter_id AND day = substr(OLD.created_at, 1, 10)
      AND source = OLD.source;
    INSERT INTO newsletter_source_days (newsletter_id, day, source, created)
    SELECT NEW.newsletter_id, substr(NEW.created_at, 1, 10), NEW.source, 1
    WHERE NEW.source IS NOT NULL
    ON CONFLICT DO UPDATE SET created = created + 1;
END;

CREATE TRIGGER subscribers_source_uncounted AFTER DELETE ON subscribers
WHEN OLD.source IS NOT NULL
BEGIN
    UPDATE newsletter_source_days SET created = created - 1
    WHERE newsletter_id = OLD.newsletter_id AND day = substr(OLD.created_at, 1, 10)
      AND source = OLD.source;
END;
