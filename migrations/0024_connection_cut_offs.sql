-- A message whose connection the relay broke before it could take it (a reset while the
-- message, its end mark or the wait for the answer was under way; a hang-up before the end
-- mark) is the relay's failure, not the recipient's: it no longer counts in `attempts` (the
-- five tries of a refused recipient). It is counted here instead, so a message that breaks
-- every connection it goes out on still ends (`failed` after 10, see domain/sending.rs).
-- Adding a column with a constant default rewrites nothing: instant at any size.
ALTER TABLE deliveries ADD COLUMN cut_offs INTEGER NOT NULL DEFAULT 0;
