-- Housekeeping: deletes up to $1 idle-worker sign-ups that expired (their worker stopped polling without withdrawing them).
with doomed as (
  select id from :PGONCE_SCHEMA.idle_workers
  where expires_at <= now()
  limit $1
  for update skip locked
), gone as (
  delete from :PGONCE_SCHEMA.idle_workers w using doomed d
  where w.id = d.id
  returning 1
)
select count(*)::integer as count from gone
