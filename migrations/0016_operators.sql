-- The operators of the installation (docs/operator.md): they see every newsletter on the
-- dashboard's /operator page, set tiers and statuses there, and are mailed the owners'
-- upgrade requests. The first account of a fresh install becomes one in the transaction that
-- creates it (domain/accounts.rs); later ones with `broadsheet operator grant EMAIL`. An
-- installation that had accounts before this migration has no operator until one is granted.
ALTER TABLE users ADD COLUMN operator INTEGER NOT NULL DEFAULT 0;
-- When the owner asked for the paid tier (the tier is `pending` meanwhile); cleared when the
-- operator moves the tier on.
ALTER TABLE newsletters ADD COLUMN upgrade_requested_at TEXT;
