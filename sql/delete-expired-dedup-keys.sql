-- Housekeeping: deletes up to $1 expired TTL dedup keys (correctness never depends on this having run).
with doomed as (
  select queue, key from :PGONCE_SCHEMA.dedup_keys
  where expires_at <= now()
  limit $1
  for update skip locked
), gone as (
  delete from :PGONCE_SCHEMA.dedup_keys k using doomed d
  where k.queue = d.queue and k.key = d.key and k.expires_at <= now()
  returning 1
)
select count(*)::integer as count from gone
