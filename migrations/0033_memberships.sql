-- Paid memberships (docs/memberships.md): readers pay the creator through the creator's own
-- Stripe account. Unrelated to `newsletters.tier`, the installation's permission to send.

-- The paid plan of a newsletter (at most one): a monthly and/or a yearly price in one
-- currency, in its minor unit (cents), an optional free trial and what paid members get.
-- The Stripe plans are made from it when Stripe is connected; a price change makes new ones
-- (a Stripe price never changes), so the ids are cleared with the amounts they were made for.
CREATE TABLE membership_plans (
    newsletter_id      INTEGER PRIMARY KEY REFERENCES newsletters(id) ON DELETE CASCADE,
    currency           TEXT NOT NULL CHECK (length(currency) = 3),
    monthly_amount     INTEGER CHECK (monthly_amount IS NULL OR monthly_amount > 0),
    yearly_amount      INTEGER CHECK (yearly_amount IS NULL OR yearly_amount > 0),
    trial_days         INTEGER NOT NULL DEFAULT 0 CHECK (trial_days BETWEEN 0 AND 730),
    description        TEXT NOT NULL DEFAULT '',
    stripe_monthly_plan TEXT,
    stripe_yearly_plan  TEXT,
    updated_at         TEXT NOT NULL,
    CHECK (monthly_amount IS NOT NULL OR yearly_amount IS NOT NULL)
);

-- The owner's Stripe account: a restricted secret key and the webhook signing secret, both
-- sealed with the key file like relay passwords (domain/values/credentials.rs), never
-- stored in the clear. `key_hint` is the key's last four characters, to show which it is.
CREATE TABLE stripe_connections (
    newsletter_id         INTEGER PRIMARY KEY REFERENCES newsletters(id) ON DELETE CASCADE,
    secret_key_sealed     BLOB NOT NULL,
    webhook_secret_sealed BLOB NOT NULL,
    key_hint              TEXT NOT NULL,
    connected_at          TEXT NOT NULL
);

-- Every Stripe event applied, by its id: a replayed event is answered and changes nothing.
CREATE TABLE stripe_events (
    newsletter_id INTEGER NOT NULL REFERENCES newsletters(id) ON DELETE CASCADE,
    event_id      TEXT NOT NULL,
    kind          TEXT NOT NULL,
    received_at   TEXT NOT NULL,
    PRIMARY KEY (newsletter_id, event_id)
) WITHOUT ROWID;

-- A reader's membership; no row is a free member, and so is a row `free` (a former member
-- whose Stripe customer is kept for the billing page). `until` ends the access of a canceled,
-- past-due or comped membership (and of a `paid` one granted by a script with an end);
-- for a membership Stripe keeps, `until` is the end of the paid period.
-- `stripe_event_at` is the creation time (Unix seconds) of the newest Stripe event applied,
-- so an older event delivered late changes nothing (docs/memberships.md, "Order").
CREATE TABLE memberships (
    subscriber_id       INTEGER PRIMARY KEY REFERENCES subscribers(id) ON DELETE CASCADE,
    newsletter_id       INTEGER NOT NULL REFERENCES newsletters(id) ON DELETE CASCADE,
    status              TEXT NOT NULL
                        CHECK (status IN ('free', 'paid', 'trialing', 'past_due', 'canceled', 'comped')),
    interval            TEXT CHECK (interval IS NULL OR interval IN ('month', 'year')),
    -- What the member pays each interval, in the plan's minor unit: the revenue figures.
    amount              INTEGER,
    until               TEXT,
    -- When paid access ends, as every query reads it (NULL: not by a date): `until`, and for
    -- a paid or trialing membership Stripe keeps, `until` and a grace of three days, since
    -- the renewal's events come a little after the period ends (domain/subscribers/memberships.rs).
    access_until        TEXT,
    since               TEXT NOT NULL,
    canceled_at         TEXT,
    stripe_customer     TEXT,
    stripe_subscription TEXT,
    stripe_event_at     INTEGER,
    -- 1 once Stripe deleted `stripe_subscription`: final, no later event of it applies.
    stripe_ended        INTEGER NOT NULL DEFAULT 0,
    updated_at          TEXT NOT NULL
);
CREATE INDEX memberships_newsletter ON memberships(newsletter_id, access_until);
CREATE INDEX memberships_stripe_customer ON memberships(stripe_customer)
    WHERE stripe_customer IS NOT NULL;

-- Reader sign-in on a newsletter's site: one-time links (15 minutes, once) and the sessions
-- they open, both kept by the hash of their token.
CREATE TABLE reader_links (
    token_hash    TEXT PRIMARY KEY,
    subscriber_id INTEGER NOT NULL REFERENCES subscribers(id) ON DELETE CASCADE,
    -- `sign_in`, or `change_email` with the address it confirms.
    purpose       TEXT NOT NULL CHECK (purpose IN ('sign_in', 'change_email')),
    new_email     TEXT,
    expires_at    TEXT NOT NULL,
    used_at       TEXT
) WITHOUT ROWID;
CREATE INDEX reader_links_subscriber ON reader_links(subscriber_id);

CREATE TABLE reader_sessions (
    token_hash    TEXT PRIMARY KEY,
    subscriber_id INTEGER NOT NULL REFERENCES subscribers(id) ON DELETE CASCADE,
    created_at    TEXT NOT NULL,
    expires_at    TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX reader_sessions_subscriber ON reader_sessions(subscriber_id);

-- Who may read an issue on the site: everyone, signed-in readers, or paid members.
ALTER TABLE issues ADD COLUMN visibility TEXT NOT NULL DEFAULT 'public'
    CHECK (visibility IN ('public', 'members', 'paid'));
-- For a paid issue's send: 1 mails paid members only; 0 mails everyone, free members
-- getting the excerpt and an upgrade link.
ALTER TABLE issues ADD COLUMN paid_members_only INTEGER NOT NULL DEFAULT 0
    CHECK (paid_members_only IN (0, 1));
-- A message of a paid issue to a reader without paid access: the excerpt and an upgrade
-- link, never the issue's text. Fixed when the recipients are recorded.
ALTER TABLE deliveries ADD COLUMN teaser INTEGER NOT NULL DEFAULT 0;
