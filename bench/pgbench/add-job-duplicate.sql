-- pgonce's add_job() for a key that is held (after the first call): the server-side ceiling of W7.
select (pgonce.add_job(queue => 'pgbench-dedup', name => 'job', data => '{"i": 1}'::jsonb, dedup_id => 'held', dedup_ttl_ms => 3600000, raise_rejection => false)).outcome;
