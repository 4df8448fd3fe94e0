-- The planner's estimate of how many jobs queue $1 has in state $2 (from the table's statistics; no row is read).
explain (format json) select 1 from :PGONCE_SCHEMA.jobs where queue = $1 and state = $2
