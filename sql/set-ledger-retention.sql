-- Sets how long processed_effects rows are kept: $1 ms, or null (the default) for ever.
update :PGONCE_SCHEMA.settings set ledger_retention_ms = $1::bigint
