-- Bumps every bucket's epoch above $1 (src/cache/epoch-listener.ts, after a server restart or a restore from backup).
select :PGONCE_SCHEMA.invalidate_cache($1::bigint)::text as epoch
