-- Sets how long processed_effects rows are kept: $1 ms, or null (the default) for ever. A retention set ends cached
-- ledger facts of every bucket: cache_settle_ms is how long to wait after the commit before reporting it, while a
-- cache listener's lease lasts ($2 false, in a caller's transaction: 0).
with changed as (
  update :PGONCE_SCHEMA.settings set ledger_retention_ms = $1::bigint returning ledger_retention_ms
)
select :PGONCE_SCHEMA._cache_settle_ms($2::boolean and exists (
  select 1 from changed where ledger_retention_ms is not null)) as cache_settle_ms
