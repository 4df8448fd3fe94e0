-- A cache listener stopped for good (src/cache/listener-lease.ts): its lease $1 ends now, and removals stop waiting for it.
delete from :PGONCE_SCHEMA.cache_listeners where listener = $1::text
