--! Previous: sha1:4d635b9aa475a91ce74f22c0976cecfd6d7de0f9
--! Hash: sha1:50b357fd6ce1277e08c82f21350efcf3b14d4a71
--! Message: completions and starts as plain statements

-- The worker's completions and starts are plain statements now (sql/complete-jobs.sql, sql/start-jobs.sql): the
-- plpgsql wrapper's RETURN QUERY cost ~1.2-2 µs of server time a job (bench/README.md, "The completion statement").
drop function :PGONCE_SCHEMA._step_jobs(bigint[], uuid[], text[], bigint[], uuid[], bigint);
