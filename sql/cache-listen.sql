-- The cache listener's slot (src/cache/epoch-listener.ts), held shared by its LISTEN session: while any session holds
-- it, every bump NOTIFYs. Waits for a committing bump that found no listener, and for every statement that decided,
-- without seeing this listener's row in cache_listeners, that its caller need not wait (_cache_settle_ms,
-- docs/redis.md): the epochs read next include what those commit.
select pg_advisory_lock_shared(:PGONCE_SCHEMA._cache_listener_key()), pg_advisory_xact_lock(:PGONCE_SCHEMA._cache_settle_key())
