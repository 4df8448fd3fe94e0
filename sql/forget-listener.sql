-- At a worker's close, on its LISTEN connection: removes worker $1 from the listeners that plain adds hand jobs to.
delete from :PGONCE_SCHEMA.worker_listeners where worker_id = $1
