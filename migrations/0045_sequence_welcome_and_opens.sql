-- Opens and clicks of sequence steps (docs/automations.md, "Sequences"): each send notes
-- its first open (and whether only automatic opens were seen: a mail privacy proxy's
-- prefetch, a scanner within seconds of delivery) and its first click by a person; the
-- step's counters follow by trigger, so the dashboard reads a row per step.
ALTER TABLE sequence_sends ADD COLUMN opened_at TEXT;
ALTER TABLE sequence_sends ADD COLUMN opened_auto INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sequence_sends ADD COLUMN clicked_at TEXT;

ALTER TABLE sequence_step_counts ADD COLUMN opened INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sequence_step_counts ADD COLUMN clicked INTEGER NOT NULL DEFAULT 0;

-- `opened` counts sends a person opened; `clicked` sends a person clicked.
CREATE TRIGGER sequence_sends_engaged AFTER UPDATE OF opened_at, opened_auto, clicked_at ON sequence_sends
BEGIN
    UPDATE sequence_step_counts SET
        opened = opened + ((NEW.opened_at IS NOT NULL AND NEW.opened_auto = 0)
                           - (OLD.opened_at IS NOT NULL AND OLD.opened_auto = 0)),
        clicked = clicked + ((NEW.clicked_at IS NOT NULL) - (OLD.clicked_at IS NOT NULL))
    WHERE step_id = NEW.step_id;
END;

-- The welcome sequence: every newsletter has one, whose first step is the welcome e-mail
-- (its subject, body and switch stay the newsletter's `welcome_*` settings, sent at
-- confirmation as before) and whose stored steps follow it. It starts when a subscription
-- is confirmed and cannot be deleted.
ALTER TABLE sequences ADD COLUMN welcome INTEGER NOT NULL DEFAULT 0;
CREATE UNIQUE INDEX sequences_one_welcome ON sequences(newsletter_id) WHERE welcome = 1;
INSERT INTO sequences (newsletter_id, name, status, trigger, welcome, created_at, updated_at)
SELECT id, 'Welcome', 'live', 'confirmed', 1, created_at, created_at FROM newsletters;
CREATE TRIGGER newsletters_have_a_welcome_sequence AFTER INSERT ON newsletters BEGIN
    INSERT INTO sequences (newsletter_id, name, status, trigger, welcome, created_at, updated_at)
    VALUES (NEW.id, 'Welcome', 'live', 'confirmed', 1, NEW.created_at, NEW.created_at);
END;
