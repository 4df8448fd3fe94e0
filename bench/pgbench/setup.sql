-- Creates the scratch table the physical-limit runs insert into (a jobs-like row: bigint id, jsonb payload, a timestamp).
drop table if exists bench_scratch;
create table bench_scratch (
  id bigserial primary key,
  payload jsonb not null,
  created_at timestamptz not null default now()
);
