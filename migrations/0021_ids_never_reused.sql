-- Ids are never handed out twice (issue 17, item 4). Without AUTOINCREMENT, SQLite gives a
-- new row the largest id in its table plus one, so the id of the newest row, once deleted, went
-- to the next row made: a deleted subscriber's id to the next subscriber (its old unsubscribe
-- link, an API client's record and a webhook consumer's then named someone else), a deleted
-- draft's id to another newsletter's next issue.
--
-- Every table whose ids leave the service (URLs, API answers, webhook payloads, the links and
-- return paths in sent mail) is rebuilt with `INTEGER PRIMARY KEY AUTOINCREMENT`: newsletters,
-- api_keys, issues, articles, subscribers, deliveries, webhook_subscriptions,
-- webhook_deliveries, custom_domains and subscriber_imports. The ids of the other tables stay
-- inside the service (users, sessions, user_tokens, jobs, events, subscription_requests,
-- sender_domains, dkim_keys) or they have none (their keys are their columns).
--
-- Each rebuild is SQLite's own recipe: the new table with the same columns in the same order,
-- defaults, CHECKs, keys and foreign keys; every row copied with its id by one
-- INSERT ... SELECT (rows are read in id order, so the new table is written in order); the old
-- table dropped (its indexes and triggers with it) and the new one renamed; then the same
-- indexes and triggers (those of 0011, unchanged) made again. The migration runner turns
-- foreign keys off meanwhile (dropping a table cascades nowhere) and checks them before
-- committing. `legacy_alter_table` is on for this migration because the triggers of other
-- tables name the table just dropped (the subscribers' triggers name newsletters): a rename
-- with it off re-reads every trigger and refuses such a schema, with it on it renames the table
-- alone, which is all this needs (nothing refers to the `_rebuilt` names).
--
-- Where counting resumes: AUTOINCREMENT's counter (sqlite_sequence) is set by the copy to the
-- largest id copied. Ids handed out and then deleted above that before this migration are
-- recorded nowhere, so they cannot be known and may be handed out once more, with one
-- exception: the events not yet pruned (webhooks::RETENTION) name their subscriber
-- (`data.subscription_id`), deleted ones included, so the subscribers' counter starts above
-- those too.
--
-- Cost: one pass over each table and its indexes built again, in one transaction; it grows
-- with the rows. Measured with the sqlite3 shell on a 177 MB database of 100,000 subscribers
-- (two tags each) and 1,000,000 deliveries: 4.3 s of CPU, 24-27 s on a busy two-core test
-- machine, so about ten times that for 1,000,000 subscribers and 10,000,000 deliveries
-- (under a minute of CPU). The file grows by the rebuilt tables' size (177 MB became 303 MB):
-- the old pages stay free for later rows, or `VACUUM` returns them. Inserts cost no more
-- afterwards, as measured (100,000 deliveries in one transaction: 0.4 s of CPU either way).

PRAGMA legacy_alter_table = ON;

-- newsletters
CREATE TABLE newsletters_rebuilt (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    owner_id         INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name             TEXT NOT NULL,
    tagline          TEXT NOT NULL DEFAULT '',
    keywords         TEXT NOT NULL DEFAULT '',
    sender_name      TEXT NOT NULL DEFAULT '',
    sender_email     TEXT NOT NULL DEFAULT '',
    subdomain        TEXT NOT NULL UNIQUE,
    status           TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'paused', 'cancelled')),
    tier             TEXT NOT NULL DEFAULT 'free' CHECK (tier IN ('free', 'pending', 'paid')),
    frequency        TEXT CHECK (frequency IN ('daily', 'three_times', 'weekly', 'skip')),
    target_audience  TEXT,
    content_tone     TEXT CHECK (content_tone IN ('professional', 'casual', 'friendly', 'formal', 'humorous')),
    newsletter_length TEXT CHECK (newsletter_length IN ('short', 'medium', 'long')),
    -- Set when the onboarding preferences step is done: the public site answers from then on.
    live_at          TEXT,
    tracking_enabled INTEGER NOT NULL DEFAULT 1,
    -- Authenticates bounce reports posted by an MTA to /bounces/<token>.
    bounce_token     TEXT NOT NULL UNIQUE,
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL,
    welcome_enabled  INTEGER NOT NULL DEFAULT 1,
    welcome_subject  TEXT,
    welcome_body     TEXT,
    welcome_body_html TEXT,
    upgrade_requested_at TEXT,
    publish_on_send  INTEGER NOT NULL DEFAULT 0,
    time_zone        TEXT NOT NULL DEFAULT 'UTC',
    accent_color     TEXT,
    logo_url         TEXT
);
INSERT INTO newsletters_rebuilt (id, owner_id, name, tagline, keywords, sender_name, sender_email,
        subdomain, status, tier, frequency, target_audience, content_tone, newsletter_length,
        live_at, tracking_enabled, bounce_token, created_at, updated_at, welcome_enabled,
        welcome_subject, welcome_body, welcome_body_html, upgrade_requested_at, publish_on_send,
        time_zone, accent_color, logo_url)
    SELECT id, owner_id, name, tagline, keywords, sender_name, sender_email, subdomain, status,
        tier, frequency, target_audience, content_tone, newsletter_length, live_at,
        tracking_enabled, bounce_token, created_at, updated_at, welcome_enabled, welcome_subject,
        welcome_body, welcome_body_html, upgrade_requested_at, publish_on_send, time_zone,
        accent_color, logo_url FROM newsletters;
DROP TABLE newsletters;
ALTER TABLE newsletters_rebuilt RENAME TO newsletters;
CREATE INDEX newsletters_owner ON newsletters(owner_id);
CREATE TRIGGER newsletters_counted AFTER INSERT ON newsletters BEGIN
    INSERT INTO subscriber_totals (newsletter_id) VALUES (NEW.id);
END;

-- api_keys
CREATE TABLE api_keys_rebuilt (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    newsletter_id INTEGER NOT NULL REFERENCES newsletters(id) ON DELETE CASCADE,
    name          TEXT NOT NULL,
    prefix        TEXT NOT NULL UNIQUE,
    -- SHA-256 (hex) of the whole 72-character key; the key itself is never stored.
    key_hash      TEXT NOT NULL,
    can_read      INTEGER NOT NULL DEFAULT 0,
    can_write     INTEGER NOT NULL DEFAULT 0,
    can_delete    INTEGER NOT NULL DEFAULT 0,
    created_at    TEXT NOT NULL,
    last_used_at  TEXT,
    revoked_at    TEXT
);
INSERT INTO api_keys_rebuilt (id, newsletter_id, name, prefix, key_hash, can_read, can_write,
        can_delete, created_at, last_used_at, revoked_at)
    SELECT id, newsletter_id, name, prefix, key_hash, can_read, can_write, can_delete, created_at,
        last_used_at, revoked_at FROM api_keys;
DROP TABLE api_keys;
ALTER TABLE api_keys_rebuilt RENAME TO api_keys;
CREATE INDEX api_keys_newsletter ON api_keys(newsletter_id);

-- issues
CREATE TABLE issues_rebuilt (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
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
    content_html     TEXT,
    UNIQUE (newsletter_id, path)
);
INSERT INTO issues_rebuilt (id, newsletter_id, subject, content_markdown, status, scheduled_for,
        sent_at, path, published_at, last_error, recipients_at, created_at, updated_at,
        relay_down_since, send_resumes_at, content_html)
    SELECT id, newsletter_id, subject, content_markdown, status, scheduled_for, sent_at, path,
        published_at, last_error, recipients_at, created_at, updated_at, relay_down_since,
        send_resumes_at, content_html FROM issues;
DROP TABLE issues;
ALTER TABLE issues_rebuilt RENAME TO issues;
CREATE INDEX issues_list ON issues(newsletter_id, status, id);
CREATE INDEX issues_due ON issues(status, scheduled_for);
CREATE TRIGGER issues_counted AFTER INSERT ON issues BEGIN
    INSERT INTO issue_counts (issue_id) VALUES (NEW.id);
END;
CREATE TRIGGER issues_deliveries_removed BEFORE DELETE ON issues BEGIN
    DELETE FROM deliveries WHERE issue_id = OLD.id;
END;

-- articles
CREATE TABLE articles_rebuilt (
    id                 INTEGER PRIMARY KEY AUTOINCREMENT,
    issue_id           INTEGER NOT NULL REFERENCES issues(id) ON DELETE CASCADE,
    position           INTEGER NOT NULL,
    title              TEXT NOT NULL,
    url                TEXT NOT NULL,
    summarized_article TEXT NOT NULL DEFAULT ''
);
INSERT INTO articles_rebuilt (id, issue_id, position, title, url, summarized_article)
    SELECT id, issue_id, position, title, url, summarized_article FROM articles;
DROP TABLE articles;
ALTER TABLE articles_rebuilt RENAME TO articles;
CREATE INDEX articles_issue ON articles(issue_id, position);

-- subscribers
CREATE TABLE subscribers_rebuilt (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
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
    welcomed_at     TEXT,
    UNIQUE (newsletter_id, email)
);
INSERT INTO subscribers_rebuilt (id, newsletter_id, email, name, status, unsubscribed_at,
        created_at, resubscribed_at, changed_at, welcomed_at)
    SELECT id, newsletter_id, email, name, status, unsubscribed_at, created_at, resubscribed_at,
        changed_at, welcomed_at FROM subscribers;
DROP TABLE subscribers;
ALTER TABLE subscribers_rebuilt RENAME TO subscribers;
CREATE INDEX subscribers_list ON subscribers(newsletter_id, status, id);
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
CREATE TRIGGER subscribers_tags_removed BEFORE DELETE ON subscribers BEGIN
    DELETE FROM subscriber_tags WHERE subscriber_id = OLD.id;
END;
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

-- deliveries
CREATE TABLE deliveries_rebuilt (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
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
    soft_bounced_at TEXT,
    UNIQUE (issue_id, subscriber_id)
);
INSERT INTO deliveries_rebuilt (id, issue_id, subscriber_id, email, status, attempts,
        next_attempt_at, last_error, sent_at, opened_at, clicked_at, bounced_at, unsubscribed_at,
        created_at, soft_bounced_at)
    SELECT id, issue_id, subscriber_id, email, status, attempts, next_attempt_at, last_error,
        sent_at, opened_at, clicked_at, bounced_at, unsubscribed_at, created_at, soft_bounced_at
        FROM deliveries;
DROP TABLE deliveries;
ALTER TABLE deliveries_rebuilt RENAME TO deliveries;
CREATE INDEX deliveries_work ON deliveries(issue_id, status, id);
CREATE INDEX deliveries_subscriber ON deliveries(subscriber_id);
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
CREATE TRIGGER deliveries_counted_by_day AFTER INSERT ON deliveries
WHEN NEW.sent_at IS NOT NULL OR NEW.opened_at IS NOT NULL OR NEW.clicked_at IS NOT NULL
BEGIN
    INSERT INTO newsletter_days (newsletter_id, day, sent, unconfirmed)
    SELECT newsletter_id, substr(NEW.sent_at, 1, 10), NEW.status != 'unconfirmed', NEW.status =
        'unconfirmed'
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
CREATE TRIGGER deliveries_sent_by_day AFTER UPDATE OF sent_at ON deliveries
WHEN OLD.sent_at IS NOT NEW.sent_at
BEGIN
    UPDATE newsletter_days SET sent = sent - (OLD.status != 'unconfirmed'),
        unconfirmed = unconfirmed - (OLD.status = 'unconfirmed')
    WHERE OLD.sent_at IS NOT NULL
        AND newsletter_id = (SELECT newsletter_id FROM issues WHERE id = OLD.issue_id)
        AND day = substr(OLD.sent_at, 1, 10);
    INSERT INTO newsletter_days (newsletter_id, day, sent, unconfirmed)
    SELECT newsletter_id, substr(NEW.sent_at, 1, 10), NEW.status != 'unconfirmed', NEW.status =
        'unconfirmed'
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

-- webhook_subscriptions
CREATE TABLE webhook_subscriptions_rebuilt (
    id                   INTEGER PRIMARY KEY AUTOINCREMENT,
    newsletter_id        INTEGER NOT NULL REFERENCES newsletters(id) ON DELETE CASCADE,
    url                  TEXT NOT NULL,
    -- JSON array of event names.
    events               TEXT NOT NULL,
    -- Kept so the service can sign; shown only at creation and rotation, never listed.
    secret               TEXT NOT NULL,
    enabled              INTEGER NOT NULL DEFAULT 1,
    -- Failed deliveries in a row; 10 disable the subscription, a success resets it.
    consecutive_failures INTEGER NOT NULL DEFAULT 0,
    disabled_reason      TEXT,
    created_at           TEXT NOT NULL,
    updated_at           TEXT NOT NULL
);
INSERT INTO webhook_subscriptions_rebuilt (id, newsletter_id, url, events, secret, enabled,
        consecutive_failures, disabled_reason, created_at, updated_at)
    SELECT id, newsletter_id, url, events, secret, enabled, consecutive_failures, disabled_reason,
        created_at, updated_at FROM webhook_subscriptions;
DROP TABLE webhook_subscriptions;
ALTER TABLE webhook_subscriptions_rebuilt RENAME TO webhook_subscriptions;
CREATE INDEX webhook_subscriptions_newsletter ON webhook_subscriptions(newsletter_id, id);

-- webhook_deliveries
CREATE TABLE webhook_deliveries_rebuilt (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    subscription_id INTEGER NOT NULL REFERENCES webhook_subscriptions(id) ON DELETE CASCADE,
    -- The event it carries; NULL for a test event sent from the dashboard.
    event_id        INTEGER REFERENCES events(id) ON DELETE SET NULL,
    -- X-Webhook-Delivery-Id / webhook-id: the same on every attempt.
    uid             TEXT NOT NULL UNIQUE,
    event           TEXT NOT NULL,
    body            TEXT NOT NULL,
    state           TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at TEXT,
    response_status INTEGER,
    response_excerpt TEXT,
    last_error      TEXT,
    delivered_at    TEXT,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL
);
INSERT INTO webhook_deliveries_rebuilt (id, subscription_id, event_id, uid, event, body, state,
        attempts, next_attempt_at, response_status, response_excerpt, last_error, delivered_at,
        created_at, updated_at)
    SELECT id, subscription_id, event_id, uid, event, body, state, attempts, next_attempt_at,
        response_status, response_excerpt, last_error, delivered_at, created_at, updated_at FROM
        webhook_deliveries;
DROP TABLE webhook_deliveries;
ALTER TABLE webhook_deliveries_rebuilt RENAME TO webhook_deliveries;
CREATE INDEX webhook_deliveries_subscription ON webhook_deliveries(subscription_id, id);
CREATE INDEX webhook_deliveries_event ON webhook_deliveries(event_id);
CREATE INDEX webhook_deliveries_state ON webhook_deliveries(state, updated_at);

-- custom_domains
CREATE TABLE custom_domains_rebuilt (
    id                 INTEGER PRIMARY KEY AUTOINCREMENT,
    newsletter_id      INTEGER NOT NULL UNIQUE REFERENCES newsletters(id) ON DELETE CASCADE,
    -- Lowercase, no trailing dot, no port.
    domain             TEXT NOT NULL UNIQUE,
    -- 'subdomain': a CNAME to <subdomain>.<public-host>; 'apex': A/AAAA records.
    method             TEXT NOT NULL CHECK (method IN ('subdomain', 'apex')),
    status             TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'active')),
    -- The value the TXT record _broadsheet-verify.<domain> must hold.
    verification_token TEXT NOT NULL,
    -- Why the last verification did not succeed (NULL before the first and once active).
    reason             TEXT,
    checked_at         TEXT,
    verified_at        TEXT,
    created_at         TEXT NOT NULL,
    updated_at         TEXT NOT NULL
);
INSERT INTO custom_domains_rebuilt (id, newsletter_id, domain, method, status, verification_token,
        reason, checked_at, verified_at, created_at, updated_at)
    SELECT id, newsletter_id, domain, method, status, verification_token, reason, checked_at,
        verified_at, created_at, updated_at FROM custom_domains;
DROP TABLE custom_domains;
ALTER TABLE custom_domains_rebuilt RENAME TO custom_domains;

-- subscriber_imports
CREATE TABLE subscriber_imports_rebuilt (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
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
INSERT INTO subscriber_imports_rebuilt (id, newsletter_id, file_name, stored_name, size_bytes,
        state, rows_done, bytes_done, created, existing, skipped, error_count, failure, created_at,
        updated_at, finished_at)
    SELECT id, newsletter_id, file_name, stored_name, size_bytes, state, rows_done, bytes_done,
        created, existing, skipped, error_count, failure, created_at, updated_at, finished_at FROM
        subscriber_imports;
DROP TABLE subscriber_imports;
ALTER TABLE subscriber_imports_rebuilt RENAME TO subscriber_imports;
CREATE INDEX subscriber_imports_newsletter ON subscriber_imports(newsletter_id, id);

-- The subscribers named by webhook events not yet pruned, deleted ones included.
INSERT INTO sqlite_sequence (name, seq)
    SELECT 'subscribers', 0 WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name =
        'subscribers');
UPDATE sqlite_sequence
    SET seq = max(seq, coalesce((SELECT max(json_extract(payload, '$.data.subscription_id'))
                                 FROM events), 0))
    WHERE name = 'subscribers';

PRAGMA legacy_alter_table = OFF;
