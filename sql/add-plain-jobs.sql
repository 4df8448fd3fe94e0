-- Adds a batch of plain items (no jobId, key or dependency) through add_plain_jobs(): one INSERT for the batch,
-- answered by one row (the new ids in input order as one text, and now() in ms); the caller knows the rest of each job.
-- One row instead of a row per item: parsing 1,000 result rows cost the client more than the INSERT cost the server.
select ids, now_ms from :PGONCE_SCHEMA.add_plain_jobs($1, $2::jsonb)
