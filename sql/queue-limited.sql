-- Whether queue $1 has a limit (or ctx.rateLimit holds it): its workers then claim with sql/claim-jobs-limited.sql.
select :PGONCE_SCHEMA._queue_limited($1) as limited
