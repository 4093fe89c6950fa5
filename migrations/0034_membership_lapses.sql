-- Telling the end of paid access that came by a date (docs/memberships.md, "Events"): a comp
-- or an imported paid period running out, a canceled membership reaching its period's end.
-- No request notices those; the periodic job `tell_membership_lapses` finds them by this
-- index and records `member.downgraded` once per end.
--
-- lapse_told: 1 once the end of the member's current paid access was told, or when they
-- have none to end (every change that leaves no paid access tells it itself); 0 while paid
-- access runs.
ALTER TABLE memberships ADD COLUMN lapse_told INTEGER NOT NULL DEFAULT 0;
UPDATE memberships SET lapse_told = 1
    WHERE status = 'free' OR access_until <= strftime('%Y-%m-%dT%H:%M:%fZ', 'now');
CREATE INDEX memberships_lapsing ON memberships(access_until) WHERE lapse_told = 0;
