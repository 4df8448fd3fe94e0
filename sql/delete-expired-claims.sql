-- Housekeeping: deletes up to $1 expired execution claims and done markers.
with doomed as (
  select key from :PGONCE_SCHEMA.execution_claims
  where expires_at <= now()
  limit $1
  for update skip locked
), gone as (
  delete from :PGONCE_SCHEMA.execution_claims c using doomed d
  where c.key = d.key and c.expires_at <= now()
  returning 1
)
select count(*)::integer as count from gone
