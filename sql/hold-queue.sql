-- ctx.rateLimit: no job of queue $1 starts before now() + $2 ms (rate_paused_until; a later hold already set stays).
-- The queue's claims then go through sql/claim-jobs-limited.sql, which waits for it.
insert into :PGONCE_SCHEMA.queue_settings as s (queue, rate_paused_until)
values ($1, now() + make_interval(secs => $2::bigint / 1000.0))
on conflict (queue) do update
  set rate_paused_until = greatest(s.rate_paused_until, excluded.rate_paused_until), updated_at = now()
returning s.rate_paused_until
