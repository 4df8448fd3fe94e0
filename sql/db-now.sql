-- The database clock, in whole ms since the epoch: every schedule is computed from it, so every tick (and each tick's
-- jobId, `sched:<queue>:<id>:<tick ms>`) falls on a whole millisecond.
select floor(extract(epoch from now()) * 1000)::float8 as now_ms
