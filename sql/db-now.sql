-- The database clock, in ms since the epoch: every schedule is computed from it.
select (extract(epoch from now()) * 1000)::float8 as now_ms
