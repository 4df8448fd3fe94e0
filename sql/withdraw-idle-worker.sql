-- Worker $1 stops accepting hand-offs (closing, or its LISTEN connection dropped). A sign-up an add is taking right
-- now is locked and skipped: that job is released by the closing worker or rescued when its lease expires.
delete from :PGONCE_SCHEMA.idle_workers r
where r.id = any(array(
  select id from :PGONCE_SCHEMA.idle_workers where worker_id = $1 for update skip locked))
