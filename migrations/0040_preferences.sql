-- The preference centre (docs/growth.md, "The preference centre"): a reader pauses mail
-- for 30 days, and chooses among the tags the owner offers as public topics.

-- A reader's pause: no issue goes to them before `until`. A row past its `until` means
-- nothing (sends compare it with the time they record their recipients), so no job has to
-- end a pause; a new pause replaces it.
CREATE TABLE subscriber_pauses (
    subscriber_id INTEGER PRIMARY KEY REFERENCES subscribers(id) ON DELETE CASCADE,
    newsletter_id INTEGER NOT NULL REFERENCES newsletters(id) ON DELETE CASCADE,
    until         TEXT NOT NULL
);
-- The pauses running in a newsletter: the count of "everyone" leaves them out.
CREATE INDEX subscriber_pauses_newsletter ON subscriber_pauses(newsletter_id, until);

-- The tags a newsletter's readers may add or remove themselves, as topics.
CREATE TABLE newsletter_topics (
    newsletter_id INTEGER NOT NULL REFERENCES newsletters(id) ON DELETE CASCADE,
    tag           TEXT NOT NULL,
    PRIMARY KEY (newsletter_id, tag)
) WITHOUT ROWID;
