-- Issue bodies are rendered to HTML once, when their Markdown is saved, and served from here:
-- the Markdown renderer's cost grows faster than its input, so it never runs on a reader's
-- request (docs/security.md, "Content: Markdown limits and rendering"). NULL until rendered.
ALTER TABLE issues ADD COLUMN content_html TEXT;

-- Issues saved before this migration have no HTML yet: one `render_content` job renders them,
-- one at a time, once the server runs (an issue beyond today's content limits gets its text
-- as plain paragraphs). Until the job reaches an issue, its pages show those plain paragraphs.
INSERT INTO jobs (kind, payload, run_at, created_at, updated_at)
SELECT 'render_content', '{}', now, now, now
FROM (SELECT strftime('%Y-%m-%dT%H:%M:%fZ', 'now') AS now)
WHERE EXISTS (SELECT 1 FROM issues);
