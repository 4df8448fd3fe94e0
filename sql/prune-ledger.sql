-- Housekeeping: deletes up to $1 processed_effects rows older than the ledger retention (settings.ledger_retention_ms;
-- none set: nothing, the ledger is kept forever).
with doomed as (
  select e.effect_key from :PGONCE_SCHEMA.processed_effects e, :PGONCE_SCHEMA.settings s
  where s.ledger_retention_ms is not null
    and e.recorded_at < now() - make_interval(secs => s.ledger_retention_ms / 1000.0)
  limit $1
  for update of e skip locked
), gone as (
  delete from :PGONCE_SCHEMA.processed_effects e using doomed d where e.effect_key = d.effect_key returning 1
)
select count(*)::integer as count from gone
