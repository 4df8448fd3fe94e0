-- pgonce's add_plain_jobs() with 1,000 plain items, as Queue.addBulk sends a plain batch: the server-side ceiling of W3 (rows/s = TPS × 1,000).
select length(ids) from pgonce.add_plain_jobs('pgbench-plain-bulk',
  (select jsonb_agg(jsonb_build_object('name', 'job', 'data', jsonb_build_object('i', g))) from generate_series(1, 1000) g));
