-- Messages handed to each relay (and by each newsletter, for its warm-up plan), counted per
-- minute: the rolling hour and day of a relay's limits, and the calendar day of a warm-up
-- cap, are sums of at most 1,440 of these rows, read once per key when a send starts and
-- kept in memory after that (domain/send_limits.rs). Written in the send's own commits; rows
-- older than two days are deleted as new ones come, so the table stays a few thousand rows
-- per relay.
CREATE TABLE send_usage (
    key    TEXT NOT NULL,
    minute INTEGER NOT NULL,
    sent   INTEGER NOT NULL,
    PRIMARY KEY (key, minute)
) WITHOUT ROWID;
