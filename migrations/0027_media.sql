-- Images uploaded in the dashboard's editor (docs/images.md). The file is
-- <data-dir>/media/<hash>.<type>, named by the SHA-256 of its re-encoded bytes, so one file
-- serves every newsletter that uploaded the same picture; each newsletter has its own row,
-- and the site serves only the files its newsletter has a row for. No id: the hash names an
-- image in its URLs.
CREATE TABLE media (
    newsletter_id INTEGER NOT NULL REFERENCES newsletters(id) ON DELETE CASCADE,
    hash          TEXT NOT NULL,
    type          TEXT NOT NULL CHECK (type IN ('png', 'jpeg', 'webp')),
    width         INTEGER NOT NULL,
    height        INTEGER NOT NULL,
    bytes         INTEGER NOT NULL,
    created_at    TEXT NOT NULL,
    PRIMARY KEY (newsletter_id, hash)
) WITHOUT ROWID;
-- The media page lists a newsletter's images newest first.
CREATE INDEX media_by_newsletter ON media(newsletter_id, created_at);
-- Whether another newsletter has the same file, before a delete removes it.
CREATE INDEX media_by_hash ON media(hash);

-- Which issues' Markdown names which image (by hash): replaced for an issue each time its
-- Markdown is saved, so "where used" and the refusal to delete an image in use read a few
-- index entries instead of every issue's text. A hash may be named before (or without) an
-- upload of it; only uploaded ones are listed.
CREATE TABLE issue_media (
    newsletter_id INTEGER NOT NULL,
    hash          TEXT NOT NULL,
    issue_id      INTEGER NOT NULL REFERENCES issues(id) ON DELETE CASCADE,
    PRIMARY KEY (newsletter_id, hash, issue_id)
) WITHOUT ROWID;
CREATE INDEX issue_media_by_issue ON issue_media(issue_id);
