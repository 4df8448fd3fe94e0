-- One single-row INSERT straight into pgonce.jobs per transaction (its primary key and jobs_due index, no queue logic): the floor under queue.add.
insert into pgonce.jobs (queue, name, data) values ('pgbench-raw', 'job', '{"i": 1}');
