-- The effects job $1's ctx.effect recorded (processed_effects_job), oldest first, at most $2.
select e.effect_key as key, e.recorded_at
from :PGONCE_SCHEMA.processed_effects e
where e.job_id = $1::bigint
order by e.recorded_at, e.effect_key
limit $2
