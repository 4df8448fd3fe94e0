-- One job of queue $1 by its internal id $2 (a job of another queue is not this queue's to read).
select * from :PGONCE_SCHEMA.jobs where id = $2 and queue = $1
