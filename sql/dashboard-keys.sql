-- Held dedup keys of queue $1 (null: every queue) in (queue, key) order after cursor $4 ([queue, key]), at most $5:
-- the key $2 exactly, or the keys starting with $3 (null: any), with their owner. A key's age counts from its owner's
-- add (dedup_keys keeps no time of its own). Walks the dedup_keys primary key; a key looked up in every queue is one
-- probe per queue of $6 (the known queues; null otherwise).
select k.queue, k.key, k.job_id::text as owner_id, o.state as owner_state, o.name as owner_name, k.expires_at,
       o.created_at, floor(extract(epoch from (now() - o.created_at)) * 1000)::float8 as age_ms
from :PGONCE_SCHEMA.dedup_keys k
join :PGONCE_SCHEMA.jobs o on o.id = k.job_id
where ($1::text is null or k.queue = $1)
  and ($6::text[] is null or k.queue = any($6::text[]))
  and ($2::text is null or k.key = $2)
  and ($3::text is null or (k.key >= $3 and starts_with(k.key, $3)))
  and ($4::text[] is null or (k.queue, k.key) > (($4::text[])[1], ($4::text[])[2]))
  and :PGONCE_SCHEMA._key_held(k.expires_at, o.state)
order by k.queue, k.key
limit $5
