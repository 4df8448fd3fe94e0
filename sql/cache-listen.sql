-- The cache listener's slot (src/cache/epoch-listener.ts), held shared by its LISTEN session: while any session holds
-- it, every bump NOTIFYs. Waits for a committing bump that found no listener, so that the epochs read next include it.
select pg_advisory_lock_shared(:PGONCE_SCHEMA._cache_listener_key())
