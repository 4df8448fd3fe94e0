-- One 1,000-row INSERT per transaction: the server's ceiling for bulk adds (rows/s = TPS × 1,000).
insert into bench_scratch (payload) select jsonb_build_object('i', g) from generate_series(1, 1000) g;
