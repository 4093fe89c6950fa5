-- Soft bounces (a DSN with a 4.x.x status, or `Action: delayed`) are noted on the delivery
-- they were reported for. A subscriber whose newest deliveries all soft-bounced, as many as
-- `tracking::SOFT_BOUNCE_LIMIT`, is marked bounced; a delivery without one between them ends
-- the run (docs/deliverability.md, "Bounces and complaints"). Adding a NULL column rewrites
-- no rows.
ALTER TABLE deliveries ADD COLUMN soft_bounced_at TEXT;
