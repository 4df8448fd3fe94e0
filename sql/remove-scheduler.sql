-- Deletes scheduler $2 of queue $1; a row back means it existed. The jobs it already added stay.
delete from :PGONCE_SCHEMA.job_schedulers where queue = $1 and id = $2 returning id
