-- One 1,000-row INSERT ... SELECT straight into pgonce.jobs (its primary key and jobs_due index, no queue logic): the floor under add_plain_jobs() (rows/s = TPS × 1,000).
insert into pgonce.jobs (queue, name, data) select 'pgbench-raw-bulk', 'job', jsonb_build_object('i', g) from generate_series(1, 1000) g;
