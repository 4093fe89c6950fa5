-- What a newsletter's site says about itself (docs/public-site.md, "About page and author"):
-- an about page the owner writes in Markdown, stored with its HTML as rendered when it was
-- saved (the site never renders on a request), and the author's name and picture. NULL is
-- none: no about page, no byline.
ALTER TABLE newsletters ADD COLUMN about_markdown TEXT;
ALTER TABLE newsletters ADD COLUMN about_html TEXT;
ALTER TABLE newsletters ADD COLUMN author_name TEXT;
ALTER TABLE newsletters ADD COLUMN author_image TEXT;

-- An issue's opening words as the archive shows them, taken from its stored HTML whenever
-- that is written, so a list of issues never reads their whole content. NULL until then: the
-- `render_content` job below fills it for issues saved before this migration.
ALTER TABLE issues ADD COLUMN excerpt TEXT;

-- The picture link previews show for an issue (og:image), when the owner chose one; NULL:
-- the issue's first image, if it has one.
ALTER TABLE issues ADD COLUMN social_image_url TEXT;

INSERT INTO jobs (kind, payload, run_at, created_at, updated_at)
SELECT 'render_content', '{}', now, now, now
FROM (SELECT strftime('%Y-%m-%dT%H:%M:%fZ', 'now') AS now)
WHERE EXISTS (SELECT 1 FROM issues);
