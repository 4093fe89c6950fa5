-- Custom fields (docs/growth.md, "Custom fields"): each newsletter defines its own, and each
-- subscriber holds at most one value per field.
CREATE TABLE custom_fields (
    -- In the API's addresses (/api/v1/fields/{id}): never handed out twice (migration 0021).
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    newsletter_id INTEGER NOT NULL REFERENCES newsletters(id) ON DELETE CASCADE,
    -- The name merge tags and CSV columns use: a lowercase letter, then lowercase letters,
    -- digits and underscores, at most 40 characters.
    name          TEXT NOT NULL,
    -- `text`, `number`, `date`, `boolean` or `choice`.
    type          TEXT NOT NULL,
    -- The options of a `choice`, a JSON array of strings; `[]` for the other types.
    options       TEXT NOT NULL DEFAULT '[]',
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL,
    UNIQUE (newsletter_id, name)
);

-- One subscriber's value of one field. `value` has no declared type, so each value keeps
-- its own: text for `text`, `date` (YYYY-MM-DD, which sorts as dates do) and `choice`, a
-- number for `number`, 0 or 1 for `boolean`; comparisons in segments then order numbers as
-- numbers.
CREATE TABLE subscriber_field_values (
    subscriber_id INTEGER NOT NULL REFERENCES subscribers(id) ON DELETE CASCADE,
    field_id      INTEGER NOT NULL REFERENCES custom_fields(id) ON DELETE CASCADE,
    value         NOT NULL,
    PRIMARY KEY (subscriber_id, field_id)
) WITHOUT ROWID;
-- Subscribers by a field's value: for segments.
CREATE INDEX subscriber_field_values_by_value ON subscriber_field_values(field_id, value);
