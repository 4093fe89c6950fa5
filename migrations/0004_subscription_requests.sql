-- Double opt-in: an address entered on a newsletter's public site waits here until the
-- e-mailed link is followed; only then does it become a subscriber.
CREATE TABLE subscription_requests (
    id            INTEGER PRIMARY KEY,
    newsletter_id INTEGER NOT NULL REFERENCES newsletters(id) ON DELETE CASCADE,
    email         TEXT NOT NULL,
    name          TEXT,
    -- SHA-256 (hex) of the token in the link; the token itself is never stored.
    token_hash    TEXT NOT NULL UNIQUE,
    expires_at    TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    UNIQUE (newsletter_id, email)
);
