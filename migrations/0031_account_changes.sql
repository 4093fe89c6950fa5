-- Account management (docs/dashboard.md, "Your account").
-- One time zone shown: an account follows each newsletter's zone on that newsletter's pages
-- unless its owner picks one of their own (own_time_zone = 1); existing accounts follow.
ALTER TABLE users ADD COLUMN own_time_zone INTEGER NOT NULL DEFAULT 0;

-- A change of e-mail address waits for its link to be followed at the new address: a token
-- of the new purpose `change_email`, carrying the address it confirms. The purpose's CHECK
-- cannot be altered in place, so the table is rebuilt by SQLite's recipe (the same columns,
-- every row copied with its id, the old table dropped, the new one renamed, its index made
-- again); the migration runner turns foreign keys off meanwhile and checks them after.
CREATE TABLE user_tokens_rebuilt (
    id         INTEGER PRIMARY KEY,
    user_id    INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    purpose    TEXT NOT NULL CHECK (purpose IN ('confirm_email', 'reset_password', 'change_email')),
    token_hash TEXT NOT NULL UNIQUE,
    expires_at TEXT NOT NULL,
    used_at    TEXT,
    created_at TEXT NOT NULL,
    new_email  TEXT
);
INSERT INTO user_tokens_rebuilt (id, user_id, purpose, token_hash, expires_at, used_at, created_at)
    SELECT id, user_id, purpose, token_hash, expires_at, used_at, created_at FROM user_tokens ORDER BY id;
DROP TABLE user_tokens;
ALTER TABLE user_tokens_rebuilt RENAME TO user_tokens;
CREATE INDEX user_tokens_user ON user_tokens(user_id, purpose);
