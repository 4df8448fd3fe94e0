-- A single-row INSERT plus pg_notify in one transaction: what a queue that wakes workers on every add pays.
begin;
insert into bench_scratch (payload) values ('{"i": 1}');
select pg_notify('bench_scratch', 'q');
commit;
