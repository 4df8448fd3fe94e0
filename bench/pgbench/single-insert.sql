-- One single-row INSERT per transaction: the server's ceiling for one-job-per-commit adds.
insert into bench_scratch (payload) values ('{"i": 1}');
