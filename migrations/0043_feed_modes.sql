-- What a followed feed does with each new item (docs/automations.md, "Following a feed"):
-- `draft` makes a draft issue, `send` sends it at once, `digest` gathers the items into one
-- issue scheduled at the newsletter's next slot.
ALTER TABLE newsletter_feeds ADD COLUMN mode TEXT NOT NULL DEFAULT 'draft'
    CHECK (mode IN ('draft', 'send', 'digest'));
-- The digest now gathering items: appended to while it is still scheduled.
ALTER TABLE newsletter_feeds ADD COLUMN digest_issue_id INTEGER REFERENCES issues(id) ON DELETE SET NULL;
