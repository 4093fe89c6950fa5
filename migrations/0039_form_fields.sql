-- Custom fields on signup forms (docs/growth.md, "Forms"): the fields a form asks for, and
-- the values a request brings until it is confirmed.

-- A JSON array of `{"id": <custom field>, "required": true|false}`; a field deleted since is
-- no longer asked.
ALTER TABLE signup_forms ADD COLUMN fields TEXT NOT NULL DEFAULT '[]';

-- The values given on the form, checked by their fields' types: a JSON array of
-- `[<custom field id>, <value>]`, set on the subscriber when the request is confirmed.
ALTER TABLE subscription_requests ADD COLUMN field_values TEXT NOT NULL DEFAULT '[]';
