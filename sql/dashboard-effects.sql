-- The effects ledger, most recent first, after cursor $3 ([recorded_at, key]), at most $4: the key $1 exactly, or the
-- keys starting with $2 (null: any). processed_effects_recorded (recorded_at), or the primary key for one key.
select e.effect_key as key, e.recorded_at, e.recorded_at::text as k1
from :PGONCE_SCHEMA.processed_effects e
where ($1::text is null or e.effect_key = $1)
  and ($2::text is null or (e.effect_key >= $2 and starts_with(e.effect_key, $2)))
  and ($3::text[] is null or (e.recorded_at, e.effect_key) < (($3::text[])[1]::timestamptz, ($3::text[])[2]))
order by e.recorded_at desc, e.effect_key desc
limit $4
