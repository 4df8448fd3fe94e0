-- pgonce's add_job() for a delayed job, which always sends a NOTIFY: add_job.sql plus the cost of a wake-up.
select (pgonce.add_job(queue => 'pgbench-delayed', name => 'job', data => '{"i": 1}'::jsonb, delay_ms => 3600000, raise_rejection => false)).outcome;
