-- Segments by a custom field (docs/growth.md, "Segments by a field"): an issue's audience
-- may also require one field of the subscriber to equal a value, or to be before or after
-- it (numbers and dates). Recorded with the issue as its tags are (migration 0018); the send
-- reads it once, when it records its deliveries.
CREATE TABLE issue_audience_fields (
    issue_id INTEGER PRIMARY KEY REFERENCES issues(id) ON DELETE CASCADE,
    -- NULL once the field is deleted: only after the send has recorded its deliveries, since a
    -- field an unsent audience names cannot be deleted (`custom_fields::delete`).
    field_id INTEGER REFERENCES custom_fields(id) ON DELETE SET NULL,
    -- The field's name when the audience was recorded, for the report of a deleted field.
    name     TEXT NOT NULL,
    -- `equals`, `before` or `after`.
    op       TEXT NOT NULL,
    -- In the field's own type, as `subscriber_field_values.value` keeps it.
    value    NOT NULL
);
CREATE INDEX issue_audience_fields_field ON issue_audience_fields(field_id);

-- A deleted field is hidden at once (its name free again) and its values are deleted in
-- short batches by the `delete_field_values` job, then the field's row: one statement over a
-- million values would hold the writer for seconds.
ALTER TABLE custom_fields ADD COLUMN deleted_at TEXT;
