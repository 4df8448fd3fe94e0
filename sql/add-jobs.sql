-- Admits a batch through add_jobs(): all or nothing; a rejection comes back as a single row with "error".
select a.ordinal, a.outcome, a.error, (a.job).*
from :PGONCE_SCHEMA.add_jobs($1, $2::jsonb) a
