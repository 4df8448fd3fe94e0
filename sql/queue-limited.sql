-- Whether queue $1 has a limit (or ctx.rateLimit holds it): its workers then claim with sql/claim-jobs-limited.sql,
-- or with sql/claim-jobs-grouped.sql when it has a group limit or a held group.
select :PGONCE_SCHEMA._queue_limited($1) as limited, :PGONCE_SCHEMA._queue_grouped($1) as grouped
