-- Records effect key $1 in the durable ledger inside the caller's transaction; a row back means first time.
insert into :PGONCE_SCHEMA.processed_effects (effect_key)
values ($1)
on conflict (effect_key) do nothing
returning 1 as recorded
