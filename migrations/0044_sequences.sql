-- Sequences (docs/automations.md, "Sequences"): ordered e-mails that follow a reader, each
-- step after a delay. A reader enters a sequence at most once (an enrollment), and each step
-- goes to each reader at most once (a send, marked at the last moment before the relay may
-- take the message, as an issue's delivery is).
CREATE TABLE sequences (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    newsletter_id   INTEGER NOT NULL REFERENCES newsletters(id) ON DELETE CASCADE,
    name            TEXT NOT NULL,
    -- `paused`: nobody enters, no step goes; readers wait where they are.
    status          TEXT NOT NULL DEFAULT 'live' CHECK (status IN ('live', 'paused')),
    -- What makes a reader enter: a confirmed subscription, a tag added, paid access, or
    -- only the owner (`manual`).
    trigger         TEXT NOT NULL CHECK (trigger IN ('confirmed', 'tag_added', 'became_paid', 'manual')),
    trigger_tag     TEXT,
    -- A reader leaves when this tag is added to them / removed from them (besides leaving
    -- the list, and the owner stopping them).
    exit_tag_added   TEXT,
    exit_tag_removed TEXT,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL,
    CHECK ((trigger = 'tag_added') = (trigger_tag IS NOT NULL))
);
CREATE INDEX sequences_of_newsletter ON sequences(newsletter_id, trigger);
CREATE INDEX sequences_by_trigger_tag ON sequences(newsletter_id, trigger_tag) WHERE trigger_tag IS NOT NULL;

CREATE TABLE sequence_steps (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    sequence_id   INTEGER NOT NULL REFERENCES sequences(id) ON DELETE CASCADE,
    -- 1, 2, ...: a reader who reached n steps gets the step at n + 1 next.
    position      INTEGER NOT NULL CHECK (position >= 1),
    subject       TEXT NOT NULL,
    body_markdown TEXT NOT NULL,
    body_html     TEXT NOT NULL,
    -- The wait after the previous step (after entering, for the first).
    delay_amount  INTEGER NOT NULL CHECK (delay_amount >= 0),
    delay_unit    TEXT NOT NULL CHECK (delay_unit IN ('minutes', 'hours', 'days')),
    -- Then the first such hour (of that weekday, when given) in the newsletter's time zone.
    at_hour       INTEGER CHECK (at_hour BETWEEN 0 AND 23),
    on_weekday    TEXT CHECK (on_weekday IN ('monday', 'tuesday', 'wednesday', 'thursday', 'friday', 'saturday', 'sunday')),
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL,
    UNIQUE (sequence_id, position),
    CHECK (on_weekday IS NULL OR at_hour IS NOT NULL)
);

CREATE TABLE sequence_enrollments (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    sequence_id   INTEGER NOT NULL REFERENCES sequences(id) ON DELETE CASCADE,
    subscriber_id INTEGER NOT NULL REFERENCES subscribers(id) ON DELETE CASCADE,
    -- How many steps the reader has reached (sent, or handed over unconfirmed).
    reached       INTEGER NOT NULL DEFAULT 0,
    -- `queued`: the next step's send job is queued.
    state         TEXT NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'queued', 'completed', 'left')),
    -- When the wait for the next step began (entering, or the previous step); NULL until
    -- the sequences round stamps it, for entries recorded by the triggers below.
    waiting_since TEXT,
    left_reason   TEXT CHECK (left_reason IN ('unsubscribed', 'tag_added', 'tag_removed', 'stopped', 'failed')),
    ended_at      TEXT,
    UNIQUE (sequence_id, subscriber_id)
);
CREATE INDEX sequence_enrollments_due ON sequence_enrollments(sequence_id, reached, waiting_since) WHERE state = 'active';
CREATE INDEX sequence_enrollments_unstamped ON sequence_enrollments(id) WHERE state = 'active' AND waiting_since IS NULL;
CREATE INDEX sequence_enrollments_of_subscriber ON sequence_enrollments(subscriber_id) WHERE state IN ('active', 'queued');

CREATE TABLE sequence_sends (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    step_id       INTEGER NOT NULL REFERENCES sequence_steps(id) ON DELETE CASCADE,
    subscriber_id INTEGER NOT NULL REFERENCES subscribers(id) ON DELETE CASCADE,
    -- `sending`: marked, the relay may have it; a run that finds it after a crash records
    -- it `unconfirmed` and never sends it again.
    status        TEXT NOT NULL CHECK (status IN ('sending', 'sent', 'unconfirmed', 'failed')),
    sent_at       TEXT NOT NULL,
    UNIQUE (step_id, subscriber_id)
);

-- Per sequence, how many readers have reached how many steps in each state: the dashboard's
-- waiting and left per step, read from a few rows whatever the list's size.
CREATE TABLE sequence_counts (
    sequence_id INTEGER NOT NULL REFERENCES sequences(id) ON DELETE CASCADE,
    reached     INTEGER NOT NULL,
    state       TEXT NOT NULL,
    readers     INTEGER NOT NULL,
    PRIMARY KEY (sequence_id, reached, state)
) WITHOUT ROWID;

-- Per step, its sends by outcome.
CREATE TABLE sequence_step_counts (
    step_id     INTEGER PRIMARY KEY REFERENCES sequence_steps(id) ON DELETE CASCADE,
    sent        INTEGER NOT NULL DEFAULT 0,
    unconfirmed INTEGER NOT NULL DEFAULT 0,
    failed      INTEGER NOT NULL DEFAULT 0
);

CREATE TRIGGER sequence_enrollments_counted AFTER INSERT ON sequence_enrollments BEGIN
    INSERT INTO sequence_counts (sequence_id, reached, state, readers)
    VALUES (NEW.sequence_id, NEW.reached, NEW.state, 1)
    ON CONFLICT DO UPDATE SET readers = readers + 1;
END;

CREATE TRIGGER sequence_enrollments_recounted AFTER UPDATE OF reached, state ON sequence_enrollments
WHEN OLD.reached != NEW.reached OR OLD.state != NEW.state
BEGIN
    UPDATE sequence_counts SET readers = readers - 1
    WHERE sequence_id = OLD.sequence_id AND reached = OLD.reached AND state = OLD.state;
    INSERT INTO sequence_counts (sequence_id, reached, state, readers)
    VALUES (NEW.sequence_id, NEW.reached, NEW.state, 1)
    ON CONFLICT DO UPDATE SET readers = readers + 1;
END;

CREATE TRIGGER sequence_enrollments_uncounted AFTER DELETE ON sequence_enrollments BEGIN
    UPDATE sequence_counts SET readers = readers - 1
    WHERE sequence_id = OLD.sequence_id AND reached = OLD.reached AND state = OLD.state;
END;

CREATE TRIGGER sequence_sends_counted AFTER INSERT ON sequence_sends WHEN NEW.status != 'sending' BEGIN
    INSERT INTO sequence_step_counts (step_id, sent, unconfirmed, failed)
    VALUES (NEW.step_id, NEW.status = 'sent', NEW.status = 'unconfirmed', NEW.status = 'failed')
    ON CONFLICT DO UPDATE SET sent = sent + excluded.sent, unconfirmed = unconfirmed + excluded.unconfirmed,
        failed = failed + excluded.failed;
END;

CREATE TRIGGER sequence_sends_recounted AFTER UPDATE OF status ON sequence_sends
WHEN OLD.status != NEW.status
BEGIN
    UPDATE sequence_step_counts SET sent = sent - (OLD.status = 'sent'),
        unconfirmed = unconfirmed - (OLD.status = 'unconfirmed'), failed = failed - (OLD.status = 'failed')
    WHERE step_id = OLD.step_id;
    INSERT INTO sequence_step_counts (step_id, sent, unconfirmed, failed)
    VALUES (NEW.step_id, NEW.status = 'sent', NEW.status = 'unconfirmed', NEW.status = 'failed')
    ON CONFLICT DO UPDATE SET sent = sent + excluded.sent, unconfirmed = unconfirmed + excluded.unconfirmed,
        failed = failed + excluded.failed;
END;

-- Entering and leaving by tags and by leaving the list, whichever way the change is made
-- (the API, a form, an import, the preference centre, a link's tag): one rule here. An
-- entry's wait starts when the sequences round stamps it (within its minute).
CREATE TRIGGER sequences_entered_by_tag AFTER INSERT ON subscriber_tags BEGIN
    UPDATE sequence_enrollments SET state = 'left', left_reason = 'tag_added'
    WHERE subscriber_id = NEW.subscriber_id AND state IN ('active', 'queued')
        AND sequence_id IN (SELECT q.id FROM sequences q JOIN subscribers s ON s.newsletter_id = q.newsletter_id
                            WHERE s.id = NEW.subscriber_id AND q.exit_tag_added = NEW.tag);
    INSERT OR IGNORE INTO sequence_enrollments (sequence_id, subscriber_id)
    SELECT q.id, s.id FROM subscribers s JOIN sequences q ON q.newsletter_id = s.newsletter_id
    WHERE s.id = NEW.subscriber_id AND s.status = 'active' AND q.status = 'live'
        AND q.trigger_tag = NEW.tag AND q.exit_tag_added IS NOT NEW.tag;
END;

CREATE TRIGGER sequences_left_by_tag AFTER DELETE ON subscriber_tags BEGIN
    UPDATE sequence_enrollments SET state = 'left', left_reason = 'tag_removed'
    WHERE subscriber_id = OLD.subscriber_id AND state IN ('active', 'queued')
        AND sequence_id IN (SELECT q.id FROM sequences q JOIN subscribers s ON s.newsletter_id = q.newsletter_id
                            WHERE s.id = OLD.subscriber_id AND q.exit_tag_removed = OLD.tag);
END;

CREATE TRIGGER sequences_left_by_leaving AFTER UPDATE OF status ON subscribers
WHEN OLD.status = 'active' AND NEW.status != 'active'
BEGIN
    UPDATE sequence_enrollments SET state = 'left', left_reason = 'unsubscribed', ended_at = NEW.changed_at
    WHERE subscriber_id = NEW.id AND state IN ('active', 'queued');
END;
