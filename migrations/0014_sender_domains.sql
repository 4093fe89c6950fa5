-- The DKIM key of a newsletter's sending domain (issue 15): the domain part of its
-- sender_email. One key per owner and domain, so an owner's newsletters at the same domain
-- share one DNS record, and nobody else's newsletter can sign with a domain another owner has
-- verified: their own key for that domain has a selector of its own that only the domain's
-- real owner can publish. Made when the dashboard or the API first shows the domain.
CREATE TABLE sender_domains (
    id          INTEGER PRIMARY KEY,
    owner_id    INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    -- Lowercase, without a trailing dot.
    domain      TEXT NOT NULL,
    -- The s= of the signatures: `bs` and random hex, unique per domain.
    selector    TEXT NOT NULL,
    -- RSA 2048 private key, PKCS #1 DER.
    private_key BLOB NOT NULL,
    -- The p= of the DNS record (base64 SubjectPublicKeyInfo), kept to show and compare.
    public_key  TEXT NOT NULL,
    status      TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'verified', 'failed')),
    -- Why the last verification failed (NULL before the first check and once verified).
    reason      TEXT,
    checked_at  TEXT,
    verified_at TEXT,
    created_at  TEXT NOT NULL,
    UNIQUE (owner_id, domain),
    UNIQUE (domain, selector)
);
