-- The audience of an issue (issue 16, segments): the active subscribers having any of its
-- tags (`excluded = 0`; none of them: every active subscriber) and none of its excluded tags
-- (`excluded = 1`). An issue without rows goes to every active subscriber, as before.
-- Recorded when the issue is saved with an audience or sent with one; the send reads it once,
-- when it records its deliveries.
CREATE TABLE issue_audience_tags (
    issue_id INTEGER NOT NULL REFERENCES issues(id) ON DELETE CASCADE,
    excluded INTEGER NOT NULL CHECK (excluded = 0 OR excluded = 1),
    tag      TEXT NOT NULL,
    PRIMARY KEY (issue_id, excluded, tag)
) WITHOUT ROWID;
