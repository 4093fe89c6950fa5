-- The subscriber each webhook event names, kept beside the event with an index, so a data
-- request (`subscriber_export`) reads that subscriber's events through the index, all of
-- them, instead of searching only the newest 100,000 events of the installation.
--
-- An event names a subscriber by `data.subscription_id` (`subscriber.*`, an unsubscribe from a
-- welcome e-mail), else by `data.delivery_id` (`email.*`: that delivery's subscriber), else by
-- `data.email`: whoever had that address in the newsletter when the event was recorded (a
-- complaint about no delivery). `events::record` fills the column by the same rule; here the
-- events not yet pruned (kept 30 days) are filled by the rule as it reads today, where an
-- address-only event goes to the subscriber who has that address now (as the search before
-- this migration read it). No column constraint: a deleted subscriber's events keep its id,
-- which is never handed out again (0021), until they are pruned.
--
-- Cost: one pass over the events (at most 30 days of them), each with one primary-key or
-- unique-index lookup, then the partial index built. `examples/export_bench.rs` times these
-- statements: 1,200,000 events in 2.6 s for the update and 0.9 s for the index (debug build,
-- docs/performance.md), so about 30 s for ten times that, once, before the server starts.
ALTER TABLE events ADD COLUMN subscriber_id INTEGER;

UPDATE events SET subscriber_id = CASE
    WHEN payload ->> '$.data.subscription_id' IS NOT NULL
        THEN payload ->> '$.data.subscription_id'
    WHEN payload ->> '$.data.delivery_id' IS NOT NULL
        THEN (SELECT d.subscriber_id FROM deliveries d
              WHERE d.id = events.payload ->> '$.data.delivery_id')
    WHEN payload ->> '$.data.email' IS NOT NULL
        THEN (SELECT s.id FROM subscribers s
              WHERE s.newsletter_id = events.newsletter_id
                AND s.email = events.payload ->> '$.data.email')
    END;

CREATE INDEX events_subscriber ON events(subscriber_id, created_at, id)
    WHERE subscriber_id IS NOT NULL;
