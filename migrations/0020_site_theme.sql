-- A newsletter's look on its public site (docs/public-site.md, "Theming"): an accent colour
-- written #rrggbb and an https:// logo URL, both checked by domain/site_theme.rs; NULL is the
-- site's default.
ALTER TABLE newsletters ADD COLUMN accent_color TEXT;
ALTER TABLE newsletters ADD COLUMN logo_url TEXT;
