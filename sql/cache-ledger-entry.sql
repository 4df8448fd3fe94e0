-- The cache's view of ledger row $1 (src/cache/effects-precheck.ts), once its recording committed: when its entry must
-- be gone (recorded_at plus the ledger retention, prune-ledger.sql's cutoff; null: never), the epoch of its bucket, the
-- database clock. No row: not recorded.
select (extract(epoch from e.recorded_at + make_interval(secs => s.ledger_retention_ms / 1000.0)) * 1000)::float8 as expires_ms,
       c.epoch::text as epoch, (extract(epoch from clock_timestamp()) * 1000)::float8 as now_ms
from :PGONCE_SCHEMA.processed_effects e
join :PGONCE_SCHEMA.cache_epochs c on c.bucket = :PGONCE_SCHEMA._cache_bucket('e ' || $1::text)
left join :PGONCE_SCHEMA.settings s on true
where e.effect_key = $1::text
