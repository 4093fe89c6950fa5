-- Signup forms that can be put on any site (docs/growth.md): each posts to its newsletter's
-- site at /f/<public_id>, with the bot checks of domain/subscribers/form_guard.rs.
CREATE TABLE signup_forms (
    -- In the dashboard's addresses: never handed out twice (migration 0021).
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    newsletter_id   INTEGER NOT NULL REFERENCES newsletters(id) ON DELETE CASCADE,
    -- Random, in the form's address: ids are not guessable from one another.
    public_id       TEXT NOT NULL UNIQUE,
    name            TEXT NOT NULL,
    -- 1: the form asks for a name (optional to fill).
    ask_name        INTEGER NOT NULL DEFAULT 1,
    -- The tags a confirmed subscriber gets, a JSON array.
    tags            TEXT NOT NULL DEFAULT '[]',
    button_text     TEXT NOT NULL,
    success_message TEXT NOT NULL,
    -- Where the browser goes after a post without JavaScript (NULL: the success page).
    redirect_url    TEXT,
    -- The origins whose pages may post for JSON (CORS), a JSON array of `scheme://host[:port]`.
    allowed_origins TEXT NOT NULL DEFAULT '[]',
    -- The proof-of-work's cost: the largest number of the ALTCHA challenge.
    pow_cost        INTEGER NOT NULL,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL
);
CREATE INDEX signup_forms_newsletter ON signup_forms(newsletter_id);

-- Solved proof-of-work challenges, kept until they expire, so each works once.
CREATE TABLE used_challenges (
    challenge  TEXT PRIMARY KEY,
    expires_at TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX used_challenges_expiry ON used_challenges(expires_at);

-- What a confirmed request brings: the form's tags, and which form it came by.
ALTER TABLE subscription_requests ADD COLUMN tags TEXT NOT NULL DEFAULT '[]';
ALTER TABLE subscription_requests ADD COLUMN form_id INTEGER REFERENCES signup_forms(id) ON DELETE SET NULL;
