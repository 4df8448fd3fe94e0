-- Records effect key $1 in the durable ledger inside the caller's transaction, for job $2 (null: outside a job); a row
-- back means first time.
insert into :PGONCE_SCHEMA.processed_effects (effect_key, job_id)
values ($1, $2::bigint)
on conflict (effect_key) do nothing
returning 1 as recorded
