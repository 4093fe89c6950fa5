-- Issue 16, item 5: "Publish issues on the web when they are sent", per newsletter. New
-- newsletters are created with it on (domain::newsletters::create); the ones that exist keep
-- today's behaviour (publishing is a separate step) until their owner turns it on.
ALTER TABLE newsletters ADD COLUMN publish_on_send INTEGER NOT NULL DEFAULT 0;
