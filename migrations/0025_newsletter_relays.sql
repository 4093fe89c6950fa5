-- A newsletter's own mail relay (issue 27, item 4): its owner's ESP account, used for its
-- mail instead of the server's --smtp-url. One per newsletter. The password is never stored
-- in the clear: `password_sealed` is sealed (ChaCha20-Poly1305) with the key in the data
-- directory's credentials.key, which is not in the database (domain/credentials.rs), so a copy
-- of the database alone does not reveal it.
CREATE TABLE newsletter_relays (
    newsletter_id   INTEGER PRIMARY KEY REFERENCES newsletters(id) ON DELETE CASCADE,
    -- A DNS name (lowercase, no trailing dot) or an IP address, without brackets.
    host            TEXT NOT NULL,
    port            INTEGER NOT NULL CHECK (port BETWEEN 1 AND 65535),
    -- `tls`: TLS from the first byte (usually port 465); `starttls`: STARTTLS required
    -- (usually 587). Never plain text.
    security        TEXT NOT NULL CHECK (security IN ('tls', 'starttls')),
    -- NULL: the relay is used without signing in.
    username        TEXT,
    password_sealed BLOB,
    -- What the relay takes at most (domain/relays.rs, RelayLimits); NULL: no limit.
    per_second      INTEGER CHECK (per_second IS NULL OR per_second >= 1),
    per_hour        INTEGER CHECK (per_hour IS NULL OR per_hour >= 1),
    per_day         INTEGER CHECK (per_day IS NULL OR per_day >= 1),
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL
);

-- The warm-up plan of a new sending domain (issue 27, item 5): off (NULL) by default; when on,
-- the daily cap of the first day, the factor it grows by each day and the UTC date it started.
-- Adding columns without a default value rewrites nothing: instant at any size.
ALTER TABLE newsletters ADD COLUMN warmup_first_day_cap INTEGER
    CHECK (warmup_first_day_cap IS NULL OR warmup_first_day_cap >= 1);
ALTER TABLE newsletters ADD COLUMN warmup_factor REAL
    CHECK (warmup_factor IS NULL OR (warmup_factor >= 1.1 AND warmup_factor <= 10));
ALTER TABLE newsletters ADD COLUMN warmup_started_on TEXT;
