-- After a commit that may have ended cached facts, where the statement could not say (src/cache/settle.ts): how long
-- to wait before reporting success (docs/redis.md: the settle interval while any cache listener's lease lasts).
select case when :PGONCE_SCHEMA._cache_leases_last() then :PGONCE_SCHEMA._cache_settle_interval_ms() else 0 end as cache_settle_ms
