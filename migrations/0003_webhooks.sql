-- Webhook subscriptions and their deliveries. Each delivery keeps the exact body it sends,
-- so every retry signs and sends the same bytes under the same delivery id.

CREATE TABLE webhook_subscriptions (
    id                   INTEGER PRIMARY KEY,
    newsletter_id        INTEGER NOT NULL REFERENCES newsletters(id) ON DELETE CASCADE,
    url                  TEXT NOT NULL,
    -- JSON array of event names.
    events               TEXT NOT NULL,
    -- Kept so the service can sign; shown only at creation and rotation, never listed.
    secret               TEXT NOT NULL,
    enabled              INTEGER NOT NULL DEFAULT 1,
    -- Failed deliveries in a row; 10 disable the subscription, a success resets it.
    consecutive_failures INTEGER NOT NULL DEFAULT 0,
    disabled_reason      TEXT,
    created_at           TEXT NOT NULL,
    updated_at           TEXT NOT NULL
);
CREATE INDEX webhook_subscriptions_newsletter ON webhook_subscriptions(newsletter_id, id);

CREATE TABLE webhook_deliveries (
    id              INTEGER PRIMARY KEY,
    subscription_id INTEGER NOT NULL REFERENCES webhook_subscriptions(id) ON DELETE CASCADE,
    -- The event it carries; NULL for a test event sent from the dashboard.
    event_id        INTEGER REFERENCES events(id) ON DELETE SET NULL,
    -- X-Webhook-Delivery-Id / webhook-id: the same on every attempt.
    uid             TEXT NOT NULL UNIQUE,
    event           TEXT NOT NULL,
    body            TEXT NOT NULL,
    state           TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at TEXT,
    response_status INTEGER,
    response_excerpt TEXT,
    last_error      TEXT,
    delivered_at    TEXT,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL
);
CREATE INDEX webhook_deliveries_subscription ON webhook_deliveries(subscription_id, id);
