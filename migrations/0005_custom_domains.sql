-- A newsletter's own domain (www.example.com or example.com), served like its subdomain once
-- the owner's DNS records are verified. One per newsletter; a domain belongs to one newsletter.
CREATE TABLE custom_domains (
    id                 INTEGER PRIMARY KEY,
    newsletter_id      INTEGER NOT NULL UNIQUE REFERENCES newsletters(id) ON DELETE CASCADE,
    -- Lowercase, no trailing dot, no port.
    domain             TEXT NOT NULL UNIQUE,
    -- 'subdomain': a CNAME to <subdomain>.<public-host>; 'apex': A/AAAA records.
    method             TEXT NOT NULL CHECK (method IN ('subdomain', 'apex')),
    status             TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'active')),
    -- The value the TXT record _broadsheet-verify.<domain> must hold.
    verification_token TEXT NOT NULL,
    -- Why the last verification did not succeed (NULL before the first and once active).
    reason             TEXT,
    checked_at         TEXT,
    verified_at        TEXT,
    created_at         TEXT NOT NULL,
    updated_at         TEXT NOT NULL
);
