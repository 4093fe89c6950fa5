-- Accounts, newsletters, API keys, the job table and rate-limit counters.
-- Timestamps are TEXT in RFC 3339 UTC with milliseconds ("2026-11-22T05:42:04.123Z"),
-- so they sort and compare as strings.

CREATE TABLE users (
    id            INTEGER PRIMARY KEY,
    email         TEXT NOT NULL UNIQUE,
    password_hash TEXT NOT NULL,
    confirmed_at  TEXT,
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL
);

-- Single-use tokens mailed to a user (e-mail confirmation, password reset); only a hash is kept.
CREATE TABLE user_tokens (
    id         INTEGER PRIMARY KEY,
    user_id    INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    purpose    TEXT NOT NULL CHECK (purpose IN ('confirm_email', 'reset_password')),
    token_hash TEXT NOT NULL UNIQUE,
    expires_at TEXT NOT NULL,
    used_at    TEXT,
    created_at TEXT NOT NULL
);
CREATE INDEX user_tokens_user ON user_tokens(user_id, purpose);

CREATE TABLE sessions (
    id           INTEGER PRIMARY KEY,
    token_hash   TEXT NOT NULL UNIQUE,
    user_id      INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    created_at   TEXT NOT NULL,
    last_seen_at TEXT NOT NULL
);
CREATE INDEX sessions_user ON sessions(user_id);

CREATE TABLE newsletters (
    id               INTEGER PRIMARY KEY,
    owner_id         INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name             TEXT NOT NULL,
    tagline          TEXT NOT NULL DEFAULT '',
    keywords         TEXT NOT NULL DEFAULT '',
    sender_name      TEXT NOT NULL DEFAULT '',
    sender_email     TEXT NOT NULL DEFAULT '',
    subdomain        TEXT NOT NULL UNIQUE,
    status           TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'paused', 'cancelled')),
    tier             TEXT NOT NULL DEFAULT 'free' CHECK (tier IN ('free', 'pending', 'paid')),
    frequency        TEXT CHECK (frequency IN ('daily', 'three_times', 'weekly', 'skip')),
    target_audience  TEXT,
    content_tone     TEXT CHECK (content_tone IN ('professional', 'casual', 'friendly', 'formal', 'humorous')),
    newsletter_length TEXT CHECK (newsletter_length IN ('short', 'medium', 'long')),
    -- Set when the onboarding preferences step is done: the public site answers from then on.
    live_at          TEXT,
    tracking_enabled INTEGER NOT NULL DEFAULT 1,
    -- Authenticates bounce reports posted by an MTA to /bounces/<token>.
    bounce_token     TEXT NOT NULL UNIQUE,
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL
);
CREATE INDEX newsletters_owner ON newsletters(owner_id);

CREATE TABLE api_keys (
    id            INTEGER PRIMARY KEY,
    newsletter_id INTEGER NOT NULL REFERENCES newsletters(id) ON DELETE CASCADE,
    name          TEXT NOT NULL,
    prefix        TEXT NOT NULL UNIQUE,
    -- SHA-256 (hex) of the whole 72-character key; the key itself is never stored.
    key_hash      TEXT NOT NULL,
    can_read      INTEGER NOT NULL DEFAULT 0,
    can_write     INTEGER NOT NULL DEFAULT 0,
    can_delete    INTEGER NOT NULL DEFAULT 0,
    created_at    TEXT NOT NULL,
    last_used_at  TEXT,
    revoked_at    TEXT
);
CREATE INDEX api_keys_newsletter ON api_keys(newsletter_id);

-- Background work: claimed atomically by the job runner, retried with backoff.
CREATE TABLE jobs (
    id          INTEGER PRIMARY KEY,
    kind        TEXT NOT NULL,
    payload     TEXT NOT NULL,
    run_at      TEXT NOT NULL,
    attempts    INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL DEFAULT 5,
    state       TEXT NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'running', 'done', 'failed')),
    last_error  TEXT,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);
CREATE INDEX jobs_due ON jobs(state, run_at);

-- Fixed-window counters (sign-in throttling, API rate limits); kept in SQLite so a restart
-- does not reset them.
CREATE TABLE rate_counters (
    bucket       TEXT NOT NULL,
    window_start INTEGER NOT NULL,
    count        INTEGER NOT NULL,
    PRIMARY KEY (bucket, window_start)
);

-- Server-wide values created on first start (e.g. the secret that signs CSRF tokens and
-- tracking links).
CREATE TABLE settings (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
