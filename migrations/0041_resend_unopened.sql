-- Resending to those who did not open (docs/automations.md): opens that are no person's
-- are told apart, and an issue may be resent once to its recipients who did not open it.

-- 1: the delivery's only opens so far were automatic (Apple Mail Privacy Protection's
-- prefetch, a scanner opening within seconds of delivery); a person's open sets it back to
-- 0. Rows opened before this migration count as a person's.
ALTER TABLE deliveries ADD COLUMN opened_auto INTEGER NOT NULL DEFAULT 0;

-- The issue's deliveries whose opens were all automatic, for its report.
ALTER TABLE issue_counts ADD COLUMN auto_opened INTEGER NOT NULL DEFAULT 0;

CREATE TRIGGER deliveries_auto_opened AFTER UPDATE OF opened_at, opened_auto ON deliveries
WHEN (OLD.opened_at IS NOT NULL AND OLD.opened_auto = 1) IS NOT (NEW.opened_at IS NOT NULL AND NEW.opened_auto = 1)
BEGIN
    UPDATE issue_counts SET auto_opened = auto_opened
        + (NEW.opened_at IS NOT NULL AND NEW.opened_auto = 1)
        - (OLD.opened_at IS NOT NULL AND OLD.opened_auto = 1)
    WHERE issue_id = NEW.issue_id;
END;

CREATE TRIGGER deliveries_auto_opened_counted AFTER INSERT ON deliveries
WHEN NEW.opened_at IS NOT NULL AND NEW.opened_auto = 1
BEGIN
    UPDATE issue_counts SET auto_opened = auto_opened + 1 WHERE issue_id = NEW.issue_id;
END;

-- On an issue resent to its non-openers: the resend (once). On the resend: the issue whose
-- non-openers it goes to, when its send records its recipients.
ALTER TABLE issues ADD COLUMN resent_unopened_as INTEGER REFERENCES issues(id) ON DELETE SET NULL;
ALTER TABLE issues ADD COLUMN resend_of INTEGER REFERENCES issues(id) ON DELETE SET NULL;
