-- At the end of a paced housekeeping runner's full batch, in its transaction: runner $1 pauses $2 times as long as the
-- transaction has taken so far (the database's clock), and other runners leave the work to it until then, with a
-- second's grace for its next batch to arrive (sql/try-maintenance-lock.sql). Returns the pause in ms.
insert into :PGONCE_SCHEMA.housekeeping_pace as p (singleton, runner, paused_until)
values (true, $1::uuid, clock_timestamp() + (clock_timestamp() - now()) * $2::float8 + interval '1 second')
on conflict (singleton) do update set runner = excluded.runner, paused_until = excluded.paused_until
returning (extract(epoch from clock_timestamp() - now()) * 1000 * $2::float8)::float8 as pause_ms
