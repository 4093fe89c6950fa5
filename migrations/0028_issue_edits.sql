-- Editing after sending (docs/editing-after-sending.md).
--
-- issues.edited_at: when the web copy of a sent issue was last edited; the public page says
-- "Updated <date>" from it. NULL for an issue never edited after it was sent.
--
-- issues.mailed_markdown / mailed_html: the content the mail was sent with, kept by the first
-- edit after sending (NULL until then, when the mail is `content_markdown` / `content_html`).
-- A resumed send, a send again to the unconfirmed and a test send read these, so an edit of
-- the web copy never changes the mail. Only edited issues hold a second copy.
--
-- issues.withdrawn_published_at: while an issue that was published is unpublished, when it
-- was first published (`published_at` is NULL then, so every public query stays as it is);
-- publishing it again puts it back in its place in the archive, without a second
-- `issue.published` event.
--
-- issues.publish_when_sent: the owner's choice for this send (1 publish, 0 not); NULL follows
-- the rule (everyone: the newsletter's publish-on-send setting; a segment: not published).
ALTER TABLE issues ADD COLUMN edited_at TEXT;
ALTER TABLE issues ADD COLUMN mailed_markdown TEXT;
ALTER TABLE issues ADD COLUMN mailed_html TEXT;
ALTER TABLE issues ADD COLUMN withdrawn_published_at TEXT;
ALTER TABLE issues ADD COLUMN publish_when_sent INTEGER
    CHECK (publish_when_sent IS NULL OR publish_when_sent IN (0, 1));
