-- pgonce's add_jobs() with 1,000 plain items, as Queue.addBulk sends it: the server-side ceiling of W3 (rows/s = TPS × 1,000).
select count(*) from pgonce.add_jobs('pgbench-bulk',
  (select jsonb_agg(jsonb_build_object('name', 'job', 'data', jsonb_build_object('i', g))) from generate_series(1, 1000) g));
