-- On a worker's LISTEN connection once it listens: lists it (worker $1 of queue $2, lease $3 ms) with this session's
-- backend pid, so that plain adds can hand jobs to it while it sleeps (migration 000008); answers the pid. Forgets the
-- queue's listeners whose session is gone (a worker killed before its close): the table stays as small as the live
-- workers, whose rows adds read only while one of them sleeps.
with gone as (
  delete from :PGONCE_SCHEMA.worker_listeners l
  where l.queue = $2 and l.worker_id <> $1
    and not exists (select 1 from pg_stat_activity a
                    where a.pid = l.backend_pid and a.application_name = left('pgonce-listener ' || l.worker_id, 63))
)
insert into :PGONCE_SCHEMA.worker_listeners (worker_id, queue, backend_pid, lease_ms)
values ($1, $2, pg_backend_pid(), $3)
on conflict (worker_id) do update
  set queue = excluded.queue, backend_pid = excluded.backend_pid, lease_ms = excluded.lease_ms, connected_at = now()
returning backend_pid
