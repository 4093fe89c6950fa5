-- Account throttles (issue 12): buckets are now named after e-mail addresses and client
-- addresses, so counts of windows long over are deleted across all buckets whenever a new
-- window starts; this index keeps that delete from scanning the table.
CREATE INDEX rate_counters_window ON rate_counters(window_start);
