-- The welcome e-mail a reader gets after confirming a subscription (docs/deliverability.md,
-- "Mail a reader sees"). Per newsletter: on by default; the subject and the Markdown body
-- the owner wrote, NULL for the default text the domain defines (domain/welcome.rs), and the
-- body's HTML rendered when it was saved, so sending never renders Markdown.
ALTER TABLE newsletters ADD COLUMN welcome_enabled INTEGER NOT NULL DEFAULT 1;
ALTER TABLE newsletters ADD COLUMN welcome_subject TEXT;
ALTER TABLE newsletters ADD COLUMN welcome_body TEXT;
ALTER TABLE newsletters ADD COLUMN welcome_body_html TEXT;
-- When the subscriber's welcome e-mail was handed to the relay: set in the same commit that
-- lets the relay take it, so it is sent at most once, whatever repeats (a second confirmation,
-- a re-subscribe, a job run again after a crash).
ALTER TABLE subscribers ADD COLUMN welcomed_at TEXT;
