-- Time zones (docs/time-zones.md): the IANA name an account reads and types its times in,
-- and the one a newsletter's publishing slots (09:00) are computed in. Stored times stay UTC;
-- the names are checked against the IANA database by the domain (domain/time_zones.rs).
-- Accounts and newsletters made before this migration keep UTC, what they showed until now.
ALTER TABLE users ADD COLUMN time_zone TEXT NOT NULL DEFAULT 'UTC';
ALTER TABLE newsletters ADD COLUMN time_zone TEXT NOT NULL DEFAULT 'UTC';
