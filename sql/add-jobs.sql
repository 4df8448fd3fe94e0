-- Admits a batch through add_jobs(), lean: all or nothing; a rejection comes back as a single row with "error";
-- rows of plain items carry only id, queue, state, run_at and created_at (name is null), the caller fills the rest.
select a.ordinal, a.outcome, a.error, (a.job).*
from :PGONCE_SCHEMA.add_jobs($1, $2::jsonb, true) a
