-- One job by its internal id.
select * from :PGONCE_SCHEMA.jobs where id = $1
