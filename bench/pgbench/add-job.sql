-- pgonce's add_job() for a plain job, as Queue.add sends it: the server-side ceiling of W1/W2 (no wake-up: the queue has due work).
select (pgonce.add_job(queue => 'pgbench', name => 'job', data => '{"i": 1}'::jsonb, raise_rejection => false)).outcome;
