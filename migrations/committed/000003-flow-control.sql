--! Previous: sha1:c7225af73f7fae5965f6d9d512f9760e71bd9ace
--! Hash: sha1:d1ba00e14d0863938137f181051e2f3ba4493030
--! Message: flow-control

-- Flow control (docs/flow-control.md): a queue-wide concurrency and a sliding-window rate limit, stored per queue in
-- queue_settings (queue.setLimits) and enforced by the claim itself through reservation rows: a claim of a limited
-- queue (sql/claim-jobs-limited.sql) takes free rows FOR UPDATE SKIP LOCKED and starts at most as many jobs as it
-- took, in one statement. A concurrency slot is freed by the trigger jobs_slot_released in the transaction that ends
-- the run, fenced by its lock token; a rate row is never freed, it ages: it may be taken again durationMs after its
-- last start.

alter table :PGONCE_SCHEMA.queue_settings
  add column concurrency integer check (concurrency > 0),
  add column rate_max integer check (rate_max > 0),
  add column rate_duration_ms bigint check (rate_duration_ms > 0),
  add column rate_paused_until timestamptz,
  add constraint queue_settings_rate_limit check ((rate_max is null) = (rate_duration_ms is null));
comment on column :PGONCE_SCHEMA.queue_settings.concurrency is
  'queue.setLimits concurrency: at most this many jobs of the queue active at once (limit_slots); null: no limit.';
comment on column :PGONCE_SCHEMA.queue_settings.rate_max is
  'queue.setLimits rateLimit.max: at most this many starts in any rate_duration_ms (limit_rate_slots); null: no limit.';
comment on column :PGONCE_SCHEMA.queue_settings.rate_paused_until is
  'ctx.rateLimit(ms): no job of the queue starts before this time.';

-- The concurrency slot the current (or last) run of a job took, null if none; negated (-slot) once its completion
-- (sql/complete-jobs.sql) freed it, in one update for the batch. Only a run still holding its slot (> 0) fires
-- jobs_slot_released (its WHEN), so a completion, and the end of a job that took no slot (a queue without limits, or
-- with a rate limit only), call no trigger function; the other ends free the slot by primary key.
alter table :PGONCE_SCHEMA.jobs add column limit_slot integer;

-- A concurrency limit's slots: `concurrency` rows per queue (group_id '' for the queue-wide limit), free while job_id
-- is null. A claim takes free ones FOR UPDATE SKIP LOCKED and writes its job's id and lock token into each. Only the
-- primary key is indexed, and half of each page is left free, so that taking and freeing a slot are HOT updates (no
-- index entry to write; each claim and each end of a run updates a slot row).
create table :PGONCE_SCHEMA.limit_slots (
  queue       text not null,
  group_id    text not null default '',
  slot        integer not null check (slot > 0),
  job_id      bigint,
  lock_token  uuid,
  primary key (queue, group_id, slot)
) with (fillfactor = 50);
comment on table :PGONCE_SCHEMA.limit_slots is
  'Concurrency slots (queue.setLimits concurrency): job_id and lock_token of the run holding each, null when free.';

-- A rate limit's rows: `max` rows per queue, each holding the time of the start that last used it. A start takes a row
-- last used at least durationMs ago, so no interval of durationMs holds more than max starts. Half of each page is
-- left free so that a start's update of used_at is a HOT update, as for limit_slots.
create table :PGONCE_SCHEMA.limit_rate_slots (
  queue     text not null,
  group_id  text not null default '',
  slot      integer not null check (slot > 0),
  used_at   timestamptz not null default '-infinity',
  primary key (queue, group_id, slot)
) with (fillfactor = 50);
comment on table :PGONCE_SCHEMA.limit_rate_slots is
  'Rate-limit rows (queue.setLimits rateLimit): the start that last used each; reusable rate_duration_ms later.';

-- Whether a claim of p_queue must go through sql/claim-jobs-limited.sql: it has a limit, or ctx.rateLimit holds it.
-- The plain claim (sql/claim-jobs.sql) gives nothing for such a queue, nor for a paused one: one lookup of its row.
create function :PGONCE_SCHEMA._queue_held(p_queue text) returns boolean
language sql stable parallel safe as $$
  select coalesce((select s.paused or s.concurrency is not null or s.rate_max is not null
                     or coalesce(s.rate_paused_until > now(), false)
                   from :PGONCE_SCHEMA.queue_settings s where s.queue = p_queue), false)
$$;

-- Whether p_queue has a limit (the worker's choice of claim statement; sql/queue-limited.sql).
create function :PGONCE_SCHEMA._queue_limited(p_queue text) returns boolean
language sql stable parallel safe as $$
  select coalesce((select s.concurrency is not null or s.rate_max is not null
                     or coalesce(s.rate_paused_until > now(), false)
                   from :PGONCE_SCHEMA.queue_settings s where s.queue = p_queue), false)
$$;

-- The trigger function of jobs_slot_released: frees the slot the ended run took (jobs.limit_slot), found by primary
-- key, fenced by the run's lock token (a slot a later run of the job took carries the later token, and a slot is
-- freed once).
create function :PGONCE_SCHEMA._job_slot_released() returns trigger
language plpgsql as $$
begin
  update :PGONCE_SCHEMA.limit_slots set job_id = null, lock_token = null
  where queue = old.queue and group_id = '' and slot = old.limit_slot
    and job_id = old.id and lock_token = old.lock_token;
  return null;
end
$$;

-- A run that took a slot leaves 'active', whatever ends it: failure, retry, cancel, give-back, lease rescue, timeout,
-- an operator's UPDATE, in the same transaction; a completion by sql/complete-jobs.sql frees it itself (limit_slot
-- negated, so this WHEN is false).
create trigger jobs_slot_released after update of state on :PGONCE_SCHEMA.jobs
for each row when (old.limit_slot > 0 and new.limit_slot > 0 and old.state = 'active' and new.state <> 'active')
execute function :PGONCE_SCHEMA._job_slot_released();

-- An active job deleted (removeJob refuses it; an operator's DELETE does not).
create trigger jobs_slot_deleted after delete on :PGONCE_SCHEMA.jobs
for each row when (old.limit_slot > 0 and old.state = 'active')
execute function :PGONCE_SCHEMA._job_slot_released();

-- Each queue's limits, the slots in use and how many starts its rate window holds now.
create view :PGONCE_SCHEMA.queue_limits as
select s.queue, s.concurrency, s.rate_max, s.rate_duration_ms, s.rate_paused_until,
  (select count(*) from :PGONCE_SCHEMA.limit_slots l
   where l.queue = s.queue and l.group_id = '' and l.job_id is not null)::integer as slots_in_use,
  (select count(*) from :PGONCE_SCHEMA.limit_rate_slots r
   where r.queue = s.queue and r.group_id = '' and r.slot <= s.rate_max
     and r.used_at > now() - make_interval(secs => s.rate_duration_ms / 1000.0))::integer as rate_used
from :PGONCE_SCHEMA.queue_settings s
where s.concurrency is not null or s.rate_max is not null or s.rate_paused_until > now();

-- The due queued jobs (waiting, or delayed and due: what a claim takes) of queues that hold them back now, and what
-- holds each: 'paused', 'ctx.rateLimit' (a handler's
-- hold), 'concurrency' (every slot is held) or 'rateLimit' (the window holds max starts). A due job of a queue not
-- listed here waits only for a worker.
create view :PGONCE_SCHEMA.held_jobs as
select * from (
  select j.id, j.queue, j.name, j.run_at, case
      when s.paused then 'paused'
      when s.rate_paused_until > now() then 'ctx.rateLimit'
      when s.concurrency is not null and not exists (
        select 1 from :PGONCE_SCHEMA.limit_slots l
        where l.queue = s.queue and l.group_id = '' and l.slot <= s.concurrency and l.job_id is null) then 'concurrency'
      when s.rate_max is not null and not exists (
        select 1 from :PGONCE_SCHEMA.limit_rate_slots r
        where r.queue = s.queue and r.group_id = '' and r.slot <= s.rate_max
          and r.used_at <= now() - make_interval(secs => s.rate_duration_ms / 1000.0)) then 'rateLimit'
    end as held_by
  from :PGONCE_SCHEMA.jobs j join :PGONCE_SCHEMA.queue_settings s on s.queue = j.queue
  where :PGONCE_SCHEMA._is_queued(j.state) and j.run_at <= now()
) h
where h.held_by is not null;
