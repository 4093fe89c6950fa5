-- Sending again to the unconfirmed (issue 27, item 3; docs/sending.md, "Sending again to the
-- unconfirmed"). An `unconfirmed` delivery went out whole but the relay's answer never came,
-- so the engine never sends it again by itself; the owner may ask for one more copy.
--
-- deliveries.resent_at: when the owner asked for this delivery's second copy. Set once, so a
-- delivery is sent again at most once, whatever happens to that copy (a kill while it is in
-- flight leaves it `unconfirmed` again, `resent_at` kept, and it is not offered again).
--
-- issues.resending_since: while a `sent` issue's unconfirmed messages go out again, since
-- when; NULL otherwise. Set by the request that queues the send job, cleared by that job in
-- the transaction where it finds nothing left (or gives up on an unreachable relay), so a
-- request can tell whether a live job will still take the messages it marks, and an issue
-- never has two send jobs at once.
--
-- No new index: the eligible rows of an issue are its `unconfirmed` ones, read through
-- `deliveries_work (issue_id, status, id)`; the counters (`issue_counts`, `newsletter_days`)
-- follow the status and `sent_at` changes through the triggers of 0021, as for any delivery.
-- Adding a NULL column rewrites no rows.
ALTER TABLE deliveries ADD COLUMN resent_at TEXT;
ALTER TABLE issues ADD COLUMN resending_since TEXT;
