-- The current pgonce schema (schema "pgonce"), generated from migrations/committed by `npm run schema`: read it to see
-- the tables, indexes, functions, triggers and views the migrations leave behind. Not applied by anything: migrate()
-- applies the migrations. test/schema-file.test.ts fails when this file is stale.

create type pgonce.admission as (
  ordinal integer,
  outcome text,
  error pgonce.admission_error,
  job pgonce.jobs
);

create type pgonce.admission_error as enum ('EXTEND_NOT_PENDING', 'REPLACE_HAS_DEPENDENTS', 'DEPENDENCY_NOT_FOUND');

create domain pgonce.jobs_dedup_key as text
  constraint jobs_dedup_key_bytes CHECK (((octet_length(VALUE) >= 1) AND (octet_length(VALUE) <= 255)));

create domain pgonce.jobs_job_id as text
  constraint jobs_job_id_bytes CHECK (((octet_length(VALUE) >= 1) AND (octet_length(VALUE) <= 255)));

create domain pgonce.jobs_name as text
  constraint jobs_name_bytes CHECK (((octet_length(VALUE) >= 1) AND (octet_length(VALUE) <= 255)));

create domain pgonce.jobs_queue as text
  constraint jobs_queue_name CHECK (((octet_length(VALUE) <= 128) AND (VALUE ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]*$'::text)));

create sequence pgonce.job_ids;

create table pgonce.cache_epochs (
  bucket smallint not null,
  epoch bigint not null,
  constraint cache_epochs_pkey PRIMARY KEY (bucket),
  constraint cache_epochs_bucket_check CHECK (((bucket >= 0) AND (bucket <= 255)))
);
comment on table pgonce.cache_epochs is 'The Redis layer''s epoch of each bucket of cache identities, bumped when a cacheable fact of the bucket ends (microseconds since 1970 or more: never reused after a restore).';

create table pgonce.cache_listeners (
  listener text not null,
  trusted_until timestamp with time zone not null,
  constraint cache_listeners_pkey PRIMARY KEY (listener)
);
comment on table pgonce.cache_listeners is 'The processes whose cache listener may answer from Redis, each at most until trusted_until (src/cache/listener-lease.ts): while a row lasts, a change that ends a cached fact waits 100 ms after its commit before it reports success.';

create table pgonce.dedup_keys (
  queue text not null,
  key text not null,
  job_id bigint not null,
  expires_at timestamp with time zone,
  constraint dedup_keys_cache_changed_flush TRIGGER DEFERRABLE INITIALLY DEFERRED,
  constraint dedup_keys_cache_deleted_flush TRIGGER DEFERRABLE INITIALLY DEFERRED,
  constraint dedup_keys_pkey PRIMARY KEY (queue, key),
  constraint dedup_keys_owner FOREIGN KEY (job_id) REFERENCES pgonce.jobs(id) ON DELETE CASCADE
);
comment on table pgonce.dedup_keys is 'Held while the owner row exists and (expires_at > now() or (expires_at is null and the owner is live)).';

create table pgonce.execution_claims (
  key text not null,
  state text not null,
  token uuid,
  expires_at timestamp with time zone,
  constraint execution_claims_cache_changed_flush TRIGGER DEFERRABLE INITIALLY DEFERRED,
  constraint execution_claims_cache_deleted_flush TRIGGER DEFERRABLE INITIALLY DEFERRED,
  constraint execution_claims_pkey PRIMARY KEY (key),
  constraint execution_claims_state_check CHECK ((state = ANY (ARRAY['running'::text, 'done'::text])))
);

create table pgonce.housekeeping_pace (
  singleton boolean not null default true,
  runner uuid not null,
  paused_until timestamp with time zone not null,
  constraint housekeeping_pace_pkey PRIMARY KEY (singleton),
  constraint housekeeping_pace_singleton_check CHECK (singleton)
);
comment on table pgonce.housekeeping_pace is 'The paced housekeeping round (a Worker''s) between two batches: until paused_until, rounds of other runners leave the work to runner.';

create table pgonce.job_dependencies (
  job_id bigint not null,
  depends_on bigint not null,
  constraint job_dependencies_pkey PRIMARY KEY (job_id, depends_on),
  constraint job_dependencies_job FOREIGN KEY (job_id) REFERENCES pgonce.jobs(id) ON DELETE CASCADE,
  constraint job_dependencies_parent FOREIGN KEY (depends_on) REFERENCES pgonce.jobs(id) ON DELETE CASCADE
);

create table pgonce.job_schedulers (
  queue text not null,
  id text not null,
  every_ms bigint,
  pattern text,
  tz text,
  job_name text not null,
  job_data jsonb not null default '{}'::jsonb,
  job_opts jsonb not null default '{}'::jsonb,
  next_run_at timestamp with time zone not null,
  last_run_at timestamp with time zone,
  created_at timestamp with time zone not null default now(),
  updated_at timestamp with time zone not null default now(),
  constraint job_schedulers_pkey PRIMARY KEY (queue, id),
  constraint job_schedulers_check CHECK (((every_ms IS NULL) <> (pattern IS NULL))),
  constraint job_schedulers_every_ms_check CHECK ((every_ms > 0))
);
comment on table pgonce.job_schedulers is 'One row per scheduler: every_ms or a cron pattern (tz: IANA time zone, null: UTC), the job template, the next tick.';

create table pgonce.jobs (
  id bigint not null default nextval('pgonce.job_ids'::regclass),
  queue pgonce.jobs_queue not null,
  name pgonce.jobs_name not null,
  job_id pgonce.jobs_job_id,
  data jsonb not null,
  state text not null default 'waiting'::text,
  priority integer not null default pgonce._default_priority(),
  run_at timestamp with time zone not null default now(),
  attempts integer not null default 0,
  max_attempts integer not null default pgonce._default_max_attempts(),
  backoff jsonb,
  dedup_key pgonce.jobs_dedup_key,
  lock_token uuid,
  locked_until timestamp with time zone,
  locked_by text,
  last_error text,
  error_stack text,
  result jsonb,
  created_at timestamp with time zone not null default now(),
  started_at timestamp with time zone,
  finished_at timestamp with time zone,
  has_dependents boolean not null default false,
  cancel_requested_at timestamp with time zone,
  progress jsonb,
  trace_context text,
  stalls integer not null default 0,
  constraint jobs_pkey PRIMARY KEY (id),
  constraint jobs_state_check CHECK ((state = ANY (ARRAY['waiting'::text, 'delayed'::text, 'waiting-children'::text, 'claimed'::text, 'active'::text, 'completed'::text, 'failed'::text, 'cancelled'::text])))
);
comment on table pgonce.jobs is 'One row per job generation. state: waiting|delayed|waiting-children|claimed|active|completed|failed|cancelled (claimed: leased by a worker, handler not started). attempts counts handler starts.';
comment on column pgonce.jobs.has_dependents is 'A job added with dependsOn names this one: its end promotes or fails them (jobs_finished).';
comment on column pgonce.jobs.cancel_requested_at is 'queue.cancelJob() on a running job: its handler is aborted and it ends cancelled.';
comment on column pgonce.jobs.trace_context is 'W3C traceparent of the add, continued by the worker''s span.';
comment on column pgonce.jobs.stalls is 'How many runs of this job ended with an expired lease (a crashed or blocked worker).';

create table pgonce.migrations (
  filename text not null,
  hash text not null,
  applied_at timestamp with time zone not null default now(),
  constraint migrations_pkey PRIMARY KEY (filename)
);

create table pgonce.processed_effects (
  effect_key text not null,
  recorded_at timestamp with time zone not null default now(),
  constraint processed_effects_cache_changed_flush TRIGGER DEFERRABLE INITIALLY DEFERRED,
  constraint processed_effects_cache_deleted_flush TRIGGER DEFERRABLE INITIALLY DEFERRED,
  constraint processed_effects_pkey PRIMARY KEY (effect_key)
);

create table pgonce.queue_settings (
  queue text not null,
  paused boolean not null default false,
  completed_retention_ms bigint,
  failed_retention_ms bigint,
  max_completed integer,
  updated_at timestamp with time zone not null default now(),
  constraint queue_settings_pkey PRIMARY KEY (queue),
  constraint queue_settings_completed_retention_ms_check CHECK ((completed_retention_ms >= 0)),
  constraint queue_settings_failed_retention_ms_check CHECK ((failed_retention_ms >= 0)),
  constraint queue_settings_max_completed_check CHECK ((max_completed >= 0))
);
comment on table pgonce.queue_settings is 'Per queue: paused (workers claim nothing), retention of completed (and cancelled) and failed jobs in ms, at most max_completed completed jobs kept; null: the default of _retention_defaults().';

create table pgonce.settings (
  singleton boolean not null default true,
  ledger_retention_ms bigint,
  cache_instance text not null default substr(md5(((random())::text || (clock_timestamp())::text)), 1, 12),
  constraint settings_cache_retention_flush TRIGGER DEFERRABLE INITIALLY DEFERRED,
  constraint settings_pkey PRIMARY KEY (singleton),
  constraint settings_ledger_retention_ms_check CHECK ((ledger_retention_ms > 0)),
  constraint settings_singleton_check CHECK (singleton)
);
comment on table pgonce.settings is 'ledger_retention_ms: processed_effects rows older than this are pruned by housekeeping; null (the default): the ledger is kept forever.';

create table pgonce.worker_listeners (
  worker_id text not null,
  queue text not null,
  backend_pid integer not null,
  lease_ms bigint not null,
  connected_at timestamp with time zone not null default now(),
  constraint worker_listeners_pkey PRIMARY KEY (worker_id),
  constraint worker_listeners_lease_ms_check CHECK ((lease_ms > 0))
);
comment on table pgonce.worker_listeners is 'One row per worker LISTEN session (written when it connects, deleted at close or by the next worker of the queue to connect once the session is gone). A plain add hands its job to a listed worker whose _handoff_key advisory lock is held (it sleeps with a free slot).';

CREATE INDEX dedup_keys_expiry ON pgonce.dedup_keys USING btree (expires_at) WHERE (expires_at IS NOT NULL);

CREATE INDEX dedup_keys_job ON pgonce.dedup_keys USING btree (job_id);

CREATE INDEX execution_claims_expiry ON pgonce.execution_claims USING btree (expires_at) WHERE (expires_at IS NOT NULL);

CREATE INDEX job_dependencies_parent ON pgonce.job_dependencies USING btree (depends_on);

CREATE INDEX job_schedulers_due ON pgonce.job_schedulers USING btree (queue, next_run_at);

CREATE INDEX jobs_delayed ON pgonce.jobs USING btree (queue, run_at) WHERE (state = 'delayed'::text);

CREATE INDEX jobs_due ON pgonce.jobs USING btree (queue, priority, run_at, id) WHERE pgonce._is_queued(state);

CREATE INDEX jobs_finished ON pgonce.jobs USING btree (queue, state, finished_at) WHERE pgonce._is_terminal(state);

CREATE INDEX jobs_job_id_history ON pgonce.jobs USING btree (job_id, id) WHERE (job_id IS NOT NULL);

CREATE INDEX jobs_leases ON pgonce.jobs USING btree (locked_until) WHERE pgonce._holds_lease(state);

CREATE UNIQUE INDEX jobs_live_job_id ON pgonce.jobs USING btree (job_id) WHERE ((job_id IS NOT NULL) AND pgonce._is_live(state));

CREATE INDEX jobs_waiting_children ON pgonce.jobs USING btree (id) WHERE (state = 'waiting-children'::text);

CREATE INDEX processed_effects_recorded ON pgonce.processed_effects USING btree (recorded_at);

CREATE INDEX worker_listeners_queue ON pgonce.worker_listeners USING btree (queue);

CREATE OR REPLACE FUNCTION pgonce._add_jobs(p_queue text, p_names text[], p_datas jsonb[], p_job_ids text[], p_dedup_ids text[], p_dedup_ttls_ms bigint[], p_extends boolean[], p_replaces boolean[], p_delays_ms bigint[], p_priorities integer[], p_max_attempts integer[], p_backoffs jsonb[], p_depends_on text[], p_trace_contexts text[])
 RETURNS SETOF pgonce.admission
 LANGUAGE plpgsql
AS $function$
declare
  v_answers "pgonce".admission[];
  v_last "pgonce".admission;
begin
  perform "pgonce"._lock_admission(p_queue, p_job_ids, p_dedup_ids, p_extends, p_replaces, p_depends_on);
  -- Only extend, replace and dependsOn can be rejected, and a rejected item writes nothing itself: the savepoint
  -- (a subtransaction) is paid only by batches in which an earlier item may have to be undone.
  if coalesce(cardinality(p_names), 0) > 1 and (true = any(p_extends) or true = any(p_replaces)
      or exists (select 1 from unnest(p_depends_on) d where d is not null)) then
    begin
      v_answers := "pgonce"._admit_batch(p_queue, p_names, p_datas, p_job_ids, p_dedup_ids, p_dedup_ttls_ms,
        p_extends, p_replaces, p_delays_ms, p_priorities, p_max_attempts, p_backoffs, p_depends_on, p_trace_contexts);
      v_last := v_answers[cardinality(v_answers)];
      if v_last.error is not null then
        raise exception using errcode = 'PO001', message = 'pgonce: batch item rejected';
      end if;
    exception when sqlstate 'PO001' then
      -- Every item of the batch is undone; the caller's transaction stays usable.
      return next v_last;
      return;
    end;
  else
    v_answers := "pgonce"._admit_batch(p_queue, p_names, p_datas, p_job_ids, p_dedup_ids, p_dedup_ttls_ms,
      p_extends, p_replaces, p_delays_ms, p_priorities, p_max_attempts, p_backoffs, p_depends_on, p_trace_contexts);
    v_last := v_answers[cardinality(v_answers)];
    if v_last.error is not null then
      return next v_last;
      return;
    end if;
  end if;

  if exists (select 1 from unnest(v_answers) a
             where a.outcome in ('added', 'replaced') and "pgonce"._is_queued((a.job).state)) then
    perform "pgonce"._wake(p_queue);
  end if;
  return query select * from unnest(v_answers) order by 1;
end
$function$;

CREATE OR REPLACE FUNCTION pgonce._admit_batch(p_queue text, p_names text[], p_datas jsonb[], p_job_ids text[], p_dedup_ids text[], p_dedup_ttls_ms bigint[], p_extends boolean[], p_replaces boolean[], p_delays_ms bigint[], p_priorities integer[], p_max_attempts integer[], p_backoffs jsonb[], p_depends_on text[], p_trace_contexts text[])
 RETURNS pgonce.admission[]
 LANGUAGE plpgsql
AS $function$
declare
  v_n integer := coalesce(cardinality(p_names), 0);
  v_plain boolean[];
  v_answers "pgonce".admission[] := '{}';
  v_one record;
  i integer;
begin
  select coalesce(array_agg(p_job_ids[s] is null and p_dedup_ids[s] is null and p_depends_on[s] is null order by s), '{}')
  into v_plain from generate_series(1, v_n) s;

  if true = any(v_plain) then
    -- nextval() follows array order, so the inserted rows in id order are the plain items in array order.
    with ins as (
      select j from "pgonce"._insert_jobs(p_queue,
        array(select p_names[s] from generate_series(1, v_n) s where v_plain[s] order by s),
        array(select p_datas[s] from generate_series(1, v_n) s where v_plain[s] order by s),
        null, null,
        array(select p_delays_ms[s] from generate_series(1, v_n) s where v_plain[s] order by s),
        array(select p_priorities[s] from generate_series(1, v_n) s where v_plain[s] order by s),
        array(select p_max_attempts[s] from generate_series(1, v_n) s where v_plain[s] order by s),
        array(select p_backoffs[s] from generate_series(1, v_n) s where v_plain[s] order by s),
        null,
        array(select p_trace_contexts[s] from generate_series(1, v_n) s where v_plain[s] order by s)) j
    ), numbered as (
      select row_number() over (order by (ins.j).id) as k, ins.j from ins
    ), positions as (
      select row_number() over (order by s) as k, s from generate_series(1, v_n) s where v_plain[s]
    )
    select array_agg(row(p.s::integer, 'added', null, n.j)::"pgonce".admission order by p.s)
    into v_answers
    from numbered n join positions p on p.k = n.k;
  end if;

  for i in select s from generate_series(1, v_n) s where not v_plain[s] order by s loop
    select * into v_one from "pgonce"._admit_one(p_queue, p_names[i], p_datas[i], p_job_ids[i], p_dedup_ids[i],
      p_dedup_ttls_ms[i], coalesce(p_extends[i], false), coalesce(p_replaces[i], false), p_delays_ms[i],
      p_priorities[i], p_max_attempts[i], p_backoffs[i], p_depends_on[i]::bigint[], p_trace_contexts[i]);
    v_answers := v_answers || row(i, v_one.outcome, v_one.error, v_one.job)::"pgonce".admission;
    exit when v_one.error is not null;
  end loop;
  return v_answers;
end
$function$;

CREATE OR REPLACE FUNCTION pgonce._admit_one(p_queue text, p_name text, p_data jsonb, p_job_id text, p_dedup_id text, p_dedup_ttl_ms bigint, p_extend boolean, p_replace boolean, p_delay_ms bigint, p_priority integer, p_max_attempts integer, p_backoff jsonb, p_depends_on bigint[], p_trace_context text, OUT outcome text, OUT error pgonce.admission_error, OUT job pgonce.jobs)
 RETURNS record
 LANGUAGE plpgsql
 SET enable_seqscan TO 'off'
AS $function$
declare
  v_owner "pgonce".jobs;
  v_key "pgonce".dedup_keys;
  v_held boolean;
  v_blocked boolean := false;
  v_expires timestamptz;
begin
  if coalesce(p_extend, false) and p_dedup_ttl_ms is null and not coalesce(p_replace, false) then
    raise exception 'pgonce: dedup_extend needs dedup_ttl_ms' using errcode = '22023';
  end if;
  if cardinality(p_depends_on) > 0 then
    -- Lock the parents: one completing right now either commits first (and is read completed below), or waits for
    -- this add to commit and then promotes the new dependent (its trigger reads with a fresh snapshot).
    perform 1 from "pgonce".jobs where id = any(p_depends_on) order by id for share;
    if exists (select 1 from unnest(p_depends_on) d(id) where not exists (select 1 from "pgonce".jobs j where j.id = d.id)) then
      error := 'DEPENDENCY_NOT_FOUND';
      return;
    end if;
    v_blocked := exists (select 1 from "pgonce".jobs j where j.id = any(p_depends_on) and j.state <> 'completed');
  end if;

  loop
    -- jobId first: a live generation answers, whatever the key says.
    if p_job_id is not null then
      select * into v_owner from "pgonce".jobs where job_id = p_job_id and "pgonce"._is_live(state);
      if found then
        outcome := 'duplicate-job-id';
        job := v_owner;
        return;
      end if;
    end if;

    v_held := false;
    v_key := null;
    if p_dedup_id is not null then
      -- A plain duplicate is answered without taking any lock.
      if not coalesce(p_replace, false) and not coalesce(p_extend, false) then
        select o.* into v_owner
        from "pgonce".dedup_keys k join "pgonce".jobs o on o.id = k.job_id
        where k.queue = p_queue and k.key = p_dedup_id and "pgonce"._key_held(k.expires_at, o.state);
        if found then
          outcome := 'duplicate-key';
          job := v_owner;
          return;
        end if;
      end if;
      select * into v_key from "pgonce".dedup_keys where queue = p_queue and key = p_dedup_id for update;
      if found then
        select * into v_owner from "pgonce".jobs where id = v_key.job_id;
        v_held := "pgonce"._key_held(v_key.expires_at, case when found then v_owner.state end);
      end if;
      if v_held and not coalesce(p_replace, false) then
        if coalesce(p_extend, false) then
          if not "pgonce"._is_pending(v_owner.state) then
            error := 'EXTEND_NOT_PENDING';
            job := v_owner;
            return;
          end if;
          update "pgonce".dedup_keys set expires_at = now() + make_interval(secs => p_dedup_ttl_ms / 1000.0)
          where queue = p_queue and key = p_dedup_id;
          outcome := 'extended';
        else
          outcome := 'duplicate-key';
        end if;
        job := v_owner;
        return;
      end if;
      -- A live dependent keeps its parent from being superseded; so does the new job itself, if it would depend on
      -- the pending owner its replace deletes.
      if v_held and ((v_owner.id = any(p_depends_on) and "pgonce"._is_pending(v_owner.state)) or exists (
        select 1 from "pgonce".job_dependencies d join "pgonce".jobs c on c.id = d.job_id
        where d.depends_on = v_owner.id and "pgonce"._is_live(c.state)
      )) then
        error := 'REPLACE_HAS_DEPENDENTS';
        job := v_owner;
        return;
      end if;
    end if;

    -- One row, so no arrays: the same columns and rules as _insert_jobs() (whose call cost ~30 µs here).
    insert into "pgonce".jobs
      (id, queue, name, data, job_id, dedup_key, state, run_at, priority, max_attempts, backoff, trace_context)
    values (nextval('"pgonce".job_ids'), p_queue, p_name, coalesce(p_data, '{}'::jsonb), p_job_id, p_dedup_id,
      "pgonce"._new_job_state(v_blocked, p_delay_ms), "pgonce"._due_at(p_delay_ms),
      coalesce(p_priority, "pgonce"._default_priority()),
      coalesce(p_max_attempts, "pgonce"._default_max_attempts()), p_backoff, p_trace_context)
    on conflict (job_id) where job_id is not null and "pgonce"._is_live(state) do nothing
    returning * into job;
    continue when not found;  -- the jobId went live meanwhile: the loop answers with that generation

    if p_dedup_id is not null then
      v_expires := case when p_dedup_ttl_ms is null then null else now() + make_interval(secs => p_dedup_ttl_ms / 1000.0) end;
      if v_key.queue is null then
        insert into "pgonce".dedup_keys (queue, key, job_id, expires_at)
        values (p_queue, p_dedup_id, job.id, v_expires)
        on conflict do nothing;
        if not found then
          -- Another add took the key first: undo this insert and decide again.
          delete from "pgonce".jobs where id = job.id;
          job := null;
          continue;
        end if;
      else
        -- Move the key before removing its old owner: the owner's deletion takes its keys with it.
        update "pgonce".dedup_keys set job_id = job.id, expires_at = v_expires
        where queue = p_queue and key = p_dedup_id;
        if v_held then
          -- A pending owner (even one a worker claimed ahead) is superseded; a running one finishes under its lease.
          delete from "pgonce".jobs where id = v_owner.id and "pgonce"._is_pending(state);
        end if;
      end if;
    end if;

    -- Every edge is kept, blocking or not: a live dependent keeps its parents from being replaced or pruned.
    if cardinality(p_depends_on) > 0 then
      insert into "pgonce".job_dependencies (job_id, depends_on)
      select job.id, d from unnest(p_depends_on) d on conflict do nothing;
      update "pgonce".jobs set has_dependents = true where id = any(p_depends_on) and not has_dependents;
      -- A parent that already failed or was cancelled can never complete: the new job fails at once, as its waiting
      -- siblings did when that parent ended, naming the first such parent of its dependsOn (the jobs_finished trigger
      -- then releases its no-TTL key).
      if exists (select 1 from "pgonce".jobs
                 where id = any(p_depends_on) and "pgonce"._is_terminal(state) and state <> 'completed') then
        update "pgonce".jobs j set state = 'failed', finished_at = now(),
          last_error = format('dependency %s ended %s', p.id, p.state)
        from (select p.id, p.state from unnest(p_depends_on) with ordinality d(id, n)
              join "pgonce".jobs p on p.id = d.id
              where "pgonce"._is_terminal(p.state) and p.state <> 'completed'
              order by d.n limit 1) p
        where j.id = job.id
        returning j.* into job;
      end if;
    end if;
    outcome := case when v_held then 'replaced' else 'added' end;
    return;
  end loop;
end
$function$;

CREATE OR REPLACE FUNCTION pgonce._answer(a pgonce.admission)
 RETURNS TABLE(ordinal integer, outcome text, error text, job text)
 LANGUAGE sql
 IMMUTABLE ROWS 1
AS $function$
  select a.ordinal, a.outcome, a.error::text,
    case when a.outcome in ('added', 'replaced')
      then concat_ws(',', (a.job).id, (a.job).state, (a.job).priority, (a.job).max_attempts,
        (extract(epoch from (a.job).run_at) * 1000)::float8, (extract(epoch from (a.job).created_at) * 1000)::float8)
      else (to_jsonb(a.job) || jsonb_build_object('id', (a.job).id::text))::text end
$function$;

CREATE OR REPLACE FUNCTION pgonce._as_claimed(j pgonce.jobs)
 RETURNS TABLE(id bigint, queue text, name text, job_id text, data jsonb, state text, priority integer, attempts integer, max_attempts integer, backoff jsonb, dedup_key text, lock_token uuid, last_error text, error_stack text, progress jsonb, trace_context text, run_at_ms double precision, created_at_ms double precision)
 LANGUAGE sql
 IMMUTABLE ROWS 1
AS $function$
  select j.id, j.queue, j.name, j.job_id, j.data, j.state, j.priority, j.attempts, j.max_attempts, j.backoff,
    j.dedup_key, j.lock_token, j.last_error, j.error_stack, j.progress, j.trace_context,
    (extract(epoch from j.run_at) * 1000)::float8, (extract(epoch from j.created_at) * 1000)::float8
$function$;

CREATE OR REPLACE FUNCTION pgonce._cache_bucket(p_ident text)
 RETURNS integer
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$
  select get_byte(sha256(convert_to(p_ident, 'UTF8')), 0)
$function$;

CREATE OR REPLACE FUNCTION pgonce._cache_bump(p_bucket integer)
 RETURNS bigint
 LANGUAGE plpgsql
AS $function$
declare
  v_epoch bigint;
begin
  update "pgonce".cache_epochs
  set epoch = greatest(epoch + 1, (extract(epoch from clock_timestamp()) * 1000000)::bigint)
  where bucket = p_bucket
  returning epoch into v_epoch;
  if not pg_try_advisory_xact_lock("pgonce"._cache_listener_key()) then
    perform pg_notify('pgonce:pgonce', '!cache ' || p_bucket || ' ' || v_epoch);
  end if;
  return v_epoch;
end
$function$;

CREATE OR REPLACE FUNCTION pgonce._cache_bumps_pending()
 RETURNS boolean
 LANGUAGE sql
AS $function$
  select coalesce(current_setting("pgonce"._cache_pending_setting(), true), '') not in ('', ',')
$function$;

CREATE OR REPLACE FUNCTION pgonce._cache_effect_unprunable(p_recorded_at timestamp with time zone)
 RETURNS boolean
 LANGUAGE sql
 STABLE
AS $function$
  select coalesce((select p_recorded_at >= now() - make_interval(secs => s.ledger_retention_ms / 1000.0)
                   from "pgonce".settings s), true)
$function$;

CREATE OR REPLACE FUNCTION pgonce._cache_fact_ended()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
  if tg_table_name = 'dedup_keys' then
    perform "pgonce"._cache_note("pgonce"._cache_bucket('k ' || old.queue || ' ' || old.key));
  elsif tg_table_name = 'processed_effects' then
    perform "pgonce"._cache_note("pgonce"._cache_bucket('e ' || old.effect_key));
  elsif tg_table_name = 'execution_claims' then
    perform "pgonce"._cache_note("pgonce"._cache_bucket('c ' || old.key));
  else
    perform "pgonce"._cache_note(null);
  end if;
  return null;
end
$function$;

CREATE OR REPLACE FUNCTION pgonce._cache_flush()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
declare
  v_setting text := "pgonce"._cache_pending_setting();
  v_pending text := coalesce(current_setting(v_setting, true), '');
  v_bucket integer;
begin
  if v_pending not in ('', ',') then
    perform set_config(v_setting, ',', true);
    for v_bucket in
      select distinct b::integer from unnest(string_to_array(trim(both ',' from v_pending), ',')) b order by 1
    loop
      perform "pgonce"._cache_bump(v_bucket);
    end loop;
  end if;
  return null;
end
$function$;

CREATE OR REPLACE FUNCTION pgonce._cache_key_state(p_queue text, p_key text, p_job_id bigint, OUT owned boolean, OUT key_expires_ms double precision, OUT epoch bigint, OUT will_bump boolean, OUT now_ms double precision)
 RETURNS record
 LANGUAGE plpgsql
AS $function$
declare
  v_bucket integer := "pgonce"._cache_bucket('k ' || p_queue || ' ' || p_key);
begin
  select k.job_id is not null, (extract(epoch from k.expires_at) * 1000)::float8, c.epoch,
    position(',' || v_bucket || ',' in coalesce(current_setting("pgonce"._cache_pending_setting(), true), '')) > 0,
    (extract(epoch from clock_timestamp()) * 1000)::float8
  into owned, key_expires_ms, epoch, will_bump, now_ms
  from "pgonce".cache_epochs c
  left join "pgonce".dedup_keys k
    on k.queue = p_queue and k.key = p_key and k.job_id = p_job_id and k.expires_at > now()
  where c.bucket = v_bucket;
end
$function$;

CREATE OR REPLACE FUNCTION pgonce._cache_leases_last()
 RETURNS boolean
 LANGUAGE sql
 STABLE
AS $function$
  select exists (select 1 from "pgonce".cache_listeners where trusted_until > now())
$function$;

CREATE OR REPLACE FUNCTION pgonce._cache_listener_key()
 RETURNS bigint
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
  select hashtextextended('pgonce:pgonce' || ':cache-listener', 0)
$function$;

CREATE OR REPLACE FUNCTION pgonce._cache_note(p_bucket integer)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
declare
  v_setting text := "pgonce"._cache_pending_setting();
  v_pending text := coalesce(nullif(current_setting(v_setting, true), ''), ',');
begin
  if p_bucket is null then
    v_pending := ',' || (select string_agg(b::text, ',') from generate_series(0, 255) b) || ',';
  elsif position(',' || p_bucket || ',' in v_pending) = 0 then
    v_pending := v_pending || p_bucket || ',';
  else
    return;
  end if;
  perform set_config(v_setting, v_pending, true);
end
$function$;

CREATE OR REPLACE FUNCTION pgonce._cache_pending_setting()
 RETURNS text
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
  select 'pgonce_cache.' || substr('pgonce:pgonce', 8)
$function$;

CREATE OR REPLACE FUNCTION pgonce._cache_settle_interval_ms()
 RETURNS integer
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
  select 100
$function$;

CREATE OR REPLACE FUNCTION pgonce._cache_settle_key()
 RETURNS bigint
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
  select hashtextextended('pgonce:pgonce' || ':cache-settle', 0)
$function$;

CREATE OR REPLACE FUNCTION pgonce._cache_settle_ms(p_ends boolean)
 RETURNS integer
 LANGUAGE plpgsql
AS $function$
begin
  if not coalesce(p_ends, false) then
    return 0;
  end if;
  perform pg_advisory_xact_lock_shared("pgonce"._cache_settle_key());
  if "pgonce"._cache_leases_last() then
    return "pgonce"._cache_settle_interval_ms();
  end if;
  return 0;
end
$function$;

CREATE OR REPLACE FUNCTION pgonce._cache_truncated()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
  perform "pgonce".invalidate_cache();
  return null;
end
$function$;

CREATE OR REPLACE FUNCTION pgonce._default_max_attempts()
 RETURNS integer
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
  select 1
$function$;

CREATE OR REPLACE FUNCTION pgonce._default_priority()
 RETURNS integer
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
  select 0
$function$;

CREATE OR REPLACE FUNCTION pgonce._due_at(p_delay_ms bigint)
 RETURNS timestamp with time zone
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$
  select now() + make_interval(secs => coalesce(p_delay_ms, 0) / 1000.0)
$function$;

CREATE OR REPLACE FUNCTION pgonce._hand_off(j pgonce.jobs, p_worker_id text, p_pid integer)
 RETURNS boolean
 LANGUAGE plpgsql
AS $function$
begin
  perform pg_notify('pgonce:pgonce', '!handoff ' || p_worker_id || ' ' || p_pid || ' '
    || (select (to_jsonb(x) || jsonb_build_object('id', x.id::text))::text from "pgonce"._as_claimed(j) x));
  return true;
end
$function$;

CREATE OR REPLACE FUNCTION pgonce._hand_off_target(p_queue text, p_allowed boolean, p_delay_ms bigint, p_data text, p_backoff text, p_trace_context text)
 RETURNS pgonce.worker_listeners
 LANGUAGE plpgsql
AS $function$
declare
  v "pgonce".worker_listeners;
begin
  if not coalesce(p_allowed, false) or coalesce(p_delay_ms, 0) > 0
     or octet_length(coalesce(p_data, '')) + octet_length(coalesce(p_backoff, '')) + octet_length(coalesce(p_trace_context, '')) > 3500
     or not "pgonce"._idle_worker_waits(p_queue) then
    return null;
  end if;
  -- _queue_paused()'s rule, read through this function's cached plan: a call of that SQL function plans its body
  -- again in every statement (~70 µs on PostgreSQL 15, a tenth of the add).
  if exists (select 1 from "pgonce".queue_settings s where s.queue = p_queue and s.paused) then
    return null;
  end if;
  for v in select * from "pgonce".worker_listeners l where l.queue = p_queue loop
    if not pg_try_advisory_lock_shared("pgonce"._handoff_key(v.worker_id)) then
      return v;
    end if;
    perform pg_advisory_unlock_shared("pgonce"._handoff_key(v.worker_id));
  end loop;
  return null;
end
$function$;

CREATE OR REPLACE FUNCTION pgonce._handoff_key(p_worker_id text)
 RETURNS bigint
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
  select hashtextextended('pgonce:pgonce' || ':handoff:' || p_worker_id, 0)
$function$;

CREATE OR REPLACE FUNCTION pgonce._holds_lease(state text)
 RETURNS boolean
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
  select state in ('claimed', 'active')
$function$;

CREATE OR REPLACE FUNCTION pgonce._idle_slot_key(p_queue text, p_slot integer)
 RETURNS bigint
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
  select (hashtextextended('pgonce:pgonce' || ':idle:' || p_queue, 0) & ~3::bigint) | p_slot
$function$;

CREATE OR REPLACE FUNCTION pgonce._idle_worker_waits(p_queue text)
 RETURNS boolean
 LANGUAGE sql
AS $function$
  select case
    when not pg_try_advisory_lock_shared("pgonce"._idle_slot_key(p_queue, 0)) then true
    when not pg_advisory_unlock_shared("pgonce"._idle_slot_key(p_queue, 0)) then true
    when not pg_try_advisory_lock_shared("pgonce"._idle_slot_key(p_queue, 1)) then true
    when not pg_advisory_unlock_shared("pgonce"._idle_slot_key(p_queue, 1)) then true
    when not pg_try_advisory_lock_shared("pgonce"._idle_slot_key(p_queue, 2)) then true
    when not pg_advisory_unlock_shared("pgonce"._idle_slot_key(p_queue, 2)) then true
    when not pg_try_advisory_lock_shared("pgonce"._idle_slot_key(p_queue, 3)) then true
    when not pg_advisory_unlock_shared("pgonce"._idle_slot_key(p_queue, 3)) then true
    else false end
$function$;

CREATE OR REPLACE FUNCTION pgonce._insert_jobs(p_queue text, p_names text[], p_datas jsonb[], p_job_ids text[], p_dedup_ids text[], p_delays_ms bigint[], p_priorities integer[], p_max_attempts integer[], p_backoffs jsonb[], p_blocked boolean[], p_trace_contexts text[])
 RETURNS SETOF pgonce.jobs
 LANGUAGE plpgsql
AS $function$
begin
  return query
  insert into "pgonce".jobs
    (id, queue, name, data, job_id, dedup_key, state, run_at, priority, max_attempts, backoff, trace_context)
  select nextval('"pgonce".job_ids'), p_queue, i.name, coalesce(i.data, '{}'::jsonb), i.job_id, i.dedup_id,
    "pgonce"._new_job_state(i.blocked, i.delay_ms), "pgonce"._due_at(i.delay_ms),
    coalesce(i.priority, d.priority), coalesce(i.max_attempts, d.max_attempts), i.backoff, i.trace_context
  from (
    select * from unnest(p_names, p_datas, p_job_ids, p_dedup_ids, p_delays_ms, p_priorities, p_max_attempts,
                         p_backoffs, p_blocked, p_trace_contexts)
      with ordinality as u(name, data, job_id, dedup_id, delay_ms, priority, max_attempts, backoff, blocked, trace_context, ord)
    order by u.ord
  ) i cross join "pgonce"._job_defaults() d
  on conflict (job_id) where job_id is not null and "pgonce"._is_live(state) do nothing
  returning *;
end
$function$;

CREATE OR REPLACE FUNCTION pgonce._is_live(state text)
 RETURNS boolean
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
  select state in ('waiting', 'delayed', 'waiting-children', 'claimed', 'active')
$function$;

CREATE OR REPLACE FUNCTION pgonce._is_pending(state text)
 RETURNS boolean
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
  select state in ('waiting', 'delayed', 'waiting-children', 'claimed')
$function$;

CREATE OR REPLACE FUNCTION pgonce._is_queued(state text)
 RETURNS boolean
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
  select state in ('waiting', 'delayed')
$function$;

CREATE OR REPLACE FUNCTION pgonce._is_terminal(state text)
 RETURNS boolean
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
  select state in ('completed', 'failed', 'cancelled')
$function$;

CREATE OR REPLACE FUNCTION pgonce._job_defaults(OUT priority integer, OUT max_attempts integer)
 RETURNS record
 LANGUAGE plpgsql
 IMMUTABLE PARALLEL SAFE
AS $function$
begin
  priority := "pgonce"._default_priority();
  max_attempts := "pgonce"._default_max_attempts();
end
$function$;

CREATE OR REPLACE FUNCTION pgonce._job_finished()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
  if new.dedup_key is not null then
    delete from "pgonce".dedup_keys k
    where k.queue = new.queue and k.key = new.dedup_key and k.job_id = new.id and k.expires_at is null;
  end if;
  if new.has_dependents then
    perform "pgonce"._promote_or_fail_dependents(new.id, new.state);
  end if;
  return null;
end
$function$;

CREATE OR REPLACE FUNCTION pgonce._job_removed()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
  perform "pgonce"._promote_or_fail_dependents(old.id, 'removed');
  return old;
end
$function$;

CREATE OR REPLACE FUNCTION pgonce._keep_index(p_id bigint)
 RETURNS boolean
 LANGUAGE sql
 IMMUTABLE
AS $function$
  select p_id > 0 or "pgonce"._prefer_index(p_id)
$function$;

CREATE OR REPLACE FUNCTION pgonce._key_held(expires_at timestamp with time zone, owner_state text)
 RETURNS boolean
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$
  select owner_state is not null
     and (expires_at > now() or (expires_at is null and "pgonce"._is_live(owner_state)))
$function$;

CREATE OR REPLACE FUNCTION pgonce._lock_admission(p_queue text, p_job_ids text[], p_dedup_ids text[], p_extends boolean[], p_replaces boolean[], p_depends_on text[])
 RETURNS void
 LANGUAGE plpgsql
 SET enable_seqscan TO 'off'
AS $function$
declare
  v_moves boolean := true = any(p_extends) or true = any(p_replaces);
begin
  perform pg_advisory_xact_lock(hashtextextended('pgonce:pgonce' || ':admit:' || l.k, 0))
  from (
    select distinct k from (
      select 'k:' || p_queue || ':' || d as k from unnest(p_dedup_ids) d where d is not null
      union all
      select 'j:' || j from unnest(p_job_ids) j where j is not null) x
    order by k
  ) l
  where coalesce(v_moves, false)
     or (select count(*) from unnest(p_dedup_ids) d where d is not null)
      + (select count(*) from unnest(p_job_ids) j where j is not null) > 1;
  if coalesce(v_moves, false) or exists (select 1 from unnest(p_depends_on) d where d is not null) then
    perform "pgonce"._lock_batch_rows(p_queue, p_dedup_ids, p_extends, p_replaces, p_depends_on);
  end if;
end
$function$;

CREATE OR REPLACE FUNCTION pgonce._lock_batch_rows(p_queue text, p_dedup_ids text[], p_extends boolean[], p_replaces boolean[], p_depends_on text[])
 RETURNS void
 LANGUAGE plpgsql
AS $function$
declare
  r record;
begin
  for r in
    select w.id, bool_or(w.owner) as owner
    from (select k.job_id as id, true as owner
          from unnest(p_dedup_ids, p_replaces) i(d, rep)
          join "pgonce".dedup_keys k on k.queue = p_queue and k.key = i.d
          where i.rep
          union all
          select p.id, false from unnest(p_depends_on) d(ids), unnest(d.ids::bigint[]) p(id)) w
    group by w.id
    order by w.id
  loop
    if r.owner then
      perform 1 from "pgonce".jobs where id = r.id and "pgonce"._is_pending(state) for update;
    else
      perform 1 from "pgonce".jobs where id = r.id for share;
    end if;
  end loop;
  perform 1 from "pgonce".dedup_keys k
  where k.queue = p_queue
    and k.key in (select i.d from unnest(p_dedup_ids, p_extends, p_replaces) i(d, x, rep) where i.x or i.rep)
  order by k.job_id, k.key
  for update;
end
$function$;

CREATE OR REPLACE FUNCTION pgonce._new_job_state(p_blocked boolean, p_delay_ms bigint)
 RETURNS text
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
  select case when coalesce(p_blocked, false) then 'waiting-children'
              when coalesce(p_delay_ms, 0) > 0 then 'delayed' else 'waiting' end
$function$;

CREATE OR REPLACE FUNCTION pgonce._prefer_index(p_id bigint)
 RETURNS boolean
 LANGUAGE plpgsql
 IMMUTABLE COST 1000
AS $function$
begin
  return false;
end
$function$;

CREATE OR REPLACE FUNCTION pgonce._promote_or_fail_dependents(p_parent bigint, p_parent_state text)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
declare
  v_child record;
begin
  -- Lock the dependents first, then read their parents with a fresh snapshot: two parents of one dependent
  -- completing at once take turns on its row lock, and the second sees the first completed.
  for v_child in
    select c.id from "pgonce".jobs c
    where c.id in (select d.job_id from "pgonce".job_dependencies d where d.depends_on = p_parent)
      and c.state = 'waiting-children'
    order by c.id
    for update
  loop
    if p_parent_state <> 'completed' then
      update "pgonce".jobs set state = 'failed', finished_at = now(),
        last_error = format('dependency %s %s', p_parent, case p_parent_state when 'removed' then 'was removed' else 'ended ' || p_parent_state end)
      where id = v_child.id and state = 'waiting-children';
    elsif not exists (
      select 1 from "pgonce".job_dependencies d join "pgonce".jobs p on p.id = d.depends_on
      where d.job_id = v_child.id and p.id <> p_parent and p.state <> 'completed'
    ) then
      update "pgonce".jobs
      -- clock_timestamp(): the dependent may have been added after this transaction began. Due now, it goes behind
      -- the jobs already queued (its add may be long past).
      set state = case when run_at <= clock_timestamp() then 'waiting' else 'delayed' end, run_at = greatest(run_at, now())
      where id = v_child.id and state = 'waiting-children';
      perform "pgonce"._wake(queue) from "pgonce".jobs where id = v_child.id;
    end if;
  end loop;
end
$function$;

CREATE OR REPLACE FUNCTION pgonce._prunable(j pgonce.jobs)
 RETURNS boolean
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$
  select "pgonce"._is_terminal(j.state)
     and not exists (select 1 from "pgonce".dedup_keys k where k.job_id = j.id and k.expires_at > now())
     and not exists (
       select 1 from "pgonce".job_dependencies d join "pgonce".jobs c on c.id = d.job_id
       where d.depends_on = j.id and "pgonce"._is_live(c.state))
     and (j.job_id is null or not exists (
       select 1 from "pgonce".jobs o
       where o.job_id = j.job_id and o.id < j.id and "pgonce"._is_terminal(o.state)))
$function$;

CREATE OR REPLACE FUNCTION pgonce._queue_paused(p_queue text)
 RETURNS boolean
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$
  select coalesce((select s.paused from "pgonce".queue_settings s where s.queue = p_queue), false)
$function$;

CREATE OR REPLACE FUNCTION pgonce._retention_defaults(OUT completed_ms bigint, OUT failed_ms bigint, OUT max_completed integer)
 RETURNS record
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
  select 86400000::bigint, 604800000::bigint, null::integer
$function$;

CREATE OR REPLACE FUNCTION pgonce._wake(p_queue text)
 RETURNS boolean
 LANGUAGE plpgsql
AS $function$
begin
  if "pgonce"._idle_worker_waits(p_queue) then
    perform pg_notify('pgonce:pgonce', p_queue);
    return true;
  end if;
  return false;
end
$function$;

CREATE OR REPLACE FUNCTION pgonce.add_job(queue text, name text, data jsonb DEFAULT '{}'::jsonb, job_id text DEFAULT NULL::text, dedup_id text DEFAULT NULL::text, dedup_ttl_ms bigint DEFAULT NULL::bigint, dedup_extend boolean DEFAULT false, dedup_replace boolean DEFAULT false, delay_ms bigint DEFAULT NULL::bigint, priority integer DEFAULT NULL::integer, max_attempts integer DEFAULT NULL::integer, backoff jsonb DEFAULT NULL::jsonb, depends_on bigint[] DEFAULT NULL::bigint[], raise_rejection boolean DEFAULT true, trace_context text DEFAULT NULL::text)
 RETURNS pgonce.admission
 LANGUAGE plpgsql
AS $function$
declare
  v_answer "pgonce".admission;
begin
  -- One item needs no savepoint; only an extend, a replace or a dependency takes locks first. A plain item goes
  -- through _admit_one() too: with no jobId, key or dependency it is its INSERT alone.
  if coalesce($7, false) or coalesce($8, false) or $13 is not null then
    perform "pgonce"._lock_admission($1, array[$4], array[$5], array[coalesce($7, false)],
      array[coalesce($8, false)], array[$13::text]);
  end if;
  select 1, a.outcome, a.error, a.job into v_answer from "pgonce"._admit_one($1, $2, $3, $4, $5, $6,
    coalesce($7, false), coalesce($8, false), $9, $10, $11, $12, $13, $15) a;
  if v_answer.outcome in ('added', 'replaced') and "pgonce"._is_queued((v_answer.job).state) then
    perform "pgonce"._wake($1);
  end if;
  if v_answer.error is not null and raise_rejection then
    raise exception 'pgonce: %', case v_answer.error
        when 'EXTEND_NOT_PENDING' then 'Duplicate unique_key (extended TTL): the key''s owner is no longer pending'
        when 'REPLACE_HAS_DEPENDENTS' then 'cannot replace the key''s owner: a live job depends on it'
        else 'a dependency does not exist' end
      using errcode = 'PO001', detail = v_answer.error::text;
  end if;
  return v_answer;
end
$function$;

CREATE OR REPLACE FUNCTION pgonce.add_jobs(queue text, items jsonb, raise_rejection boolean DEFAULT true)
 RETURNS SETOF pgonce.admission
 LANGUAGE plpgsql
AS $function$
declare
  v_bad jsonb;
  v_answer "pgonce".admission;
begin
  select e into v_bad from jsonb_array_elements(items) e
  where jsonb_typeof(e) <> 'object'
     or e - '{name,data,jobId,dedupId,dedupTtlMs,extend,replace,delayMs,priority,attempts,backoff,dependsOn}'::text[] <> '{}'::jsonb
  limit 1;
  if found then
    raise exception 'pgonce: add_jobs() items are objects with the keys name, data, jobId, dedupId, dedupTtlMs, extend, replace, delayMs, priority, attempts, backoff, dependsOn (item: %)',
      left(v_bad::text, 200) using errcode = '22023';
  end if;
  for v_answer in
    select a.* from (
      select array_agg(e->>'name' order by o) n, array_agg(e->'data' order by o) d, array_agg(e->>'jobId' order by o) j,
        array_agg(e->>'dedupId' order by o) k, array_agg((e->>'dedupTtlMs')::bigint order by o) t,
        array_agg((e->>'extend')::boolean order by o) x, array_agg((e->>'replace')::boolean order by o) r,
        array_agg((e->>'delayMs')::bigint order by o) dl, array_agg((e->>'priority')::integer order by o) p,
        array_agg((e->>'attempts')::integer order by o) at, array_agg(e->'backoff' order by o) b,
        array_agg(case when e ? 'dependsOn' then translate((e->'dependsOn')::text, '[]"', '{}') end order by o) dep
      from jsonb_array_elements(items) with ordinality e(e, o)
    ) i, "pgonce"._add_jobs($1, i.n, i.d, i.j, i.k, i.t, i.x, i.r, i.dl, i.p, i.at, i.b, i.dep, null) a
  loop
    if v_answer.error is not null and raise_rejection then
      raise exception 'pgonce: batch item % rejected: %', v_answer.ordinal, v_answer.error
        using errcode = 'PO001', detail = v_answer.error::text;
    end if;
    return next v_answer;
  end loop;
end
$function$;

CREATE OR REPLACE FUNCTION pgonce.invalidate_cache(p_floor bigint DEFAULT 0)
 RETURNS bigint
 LANGUAGE plpgsql
AS $function$
declare
  v_epoch bigint;
begin
  perform 1 from "pgonce".cache_epochs order by bucket for update;
  update "pgonce".cache_epochs
  set epoch = greatest(epoch + 1, (extract(epoch from clock_timestamp()) * 1000000)::bigint, coalesce(p_floor, 0) + 1);
  select max(epoch) into v_epoch from "pgonce".cache_epochs;
  perform pg_notify('pgonce:pgonce', '!cache *');
  return v_epoch;
end
$function$;

CREATE OR REPLACE PROCEDURE pgonce.remove_dedup_key(IN queue text, IN key text, INOUT removed boolean DEFAULT NULL::boolean)
 LANGUAGE plpgsql
AS $procedure$
declare
  v_ended boolean;
begin
  with gone as (
    delete from "pgonce".dedup_keys k
    where k.queue = remove_dedup_key.queue and k.key = remove_dedup_key.key and "pgonce"._keep_index(k.job_id)
    returning k.job_id, k.expires_at
  )
  select exists (
           select 1 from gone g join "pgonce".jobs o on o.id = g.job_id
           where "pgonce"._key_held(g.expires_at, o.state) and "pgonce"._keep_index(o.id)),
         exists (select 1 from gone g where g.expires_at > now())
  into removed, v_ended;
  commit;
  if v_ended then
    perform "pgonce".wait_for_caches();
  end if;
end
$procedure$;

CREATE OR REPLACE FUNCTION pgonce.wait_for_caches()
 RETURNS integer
 LANGUAGE plpgsql
AS $function$
begin
  if "pgonce"._cache_leases_last() then
    perform pg_sleep("pgonce"._cache_settle_interval_ms() / 1000.0);
    return "pgonce"._cache_settle_interval_ms();
  end if;
  return 0;
end
$function$;

CREATE TRIGGER dedup_keys_cache_changed AFTER UPDATE OF queue, key, job_id, expires_at ON pgonce.dedup_keys FOR EACH ROW WHEN (((old.expires_at > now()) AND ((new.queue <> old.queue) OR (new.key <> old.key) OR (new.job_id <> old.job_id) OR (new.expires_at IS NULL) OR (new.expires_at < old.expires_at)))) EXECUTE FUNCTION pgonce._cache_fact_ended();

CREATE CONSTRAINT TRIGGER dedup_keys_cache_changed_flush AFTER UPDATE OF queue, key, job_id, expires_at ON pgonce.dedup_keys DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (((old.expires_at > now()) AND ((new.queue <> old.queue) OR (new.key <> old.key) OR (new.job_id <> old.job_id) OR (new.expires_at IS NULL) OR (new.expires_at < old.expires_at)))) EXECUTE FUNCTION pgonce._cache_flush();

CREATE TRIGGER dedup_keys_cache_deleted AFTER DELETE ON pgonce.dedup_keys FOR EACH ROW WHEN ((old.expires_at > now())) EXECUTE FUNCTION pgonce._cache_fact_ended();

CREATE CONSTRAINT TRIGGER dedup_keys_cache_deleted_flush AFTER DELETE ON pgonce.dedup_keys DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN ((old.expires_at > now())) EXECUTE FUNCTION pgonce._cache_flush();

CREATE TRIGGER dedup_keys_cache_truncated AFTER TRUNCATE ON pgonce.dedup_keys FOR EACH STATEMENT EXECUTE FUNCTION pgonce._cache_truncated();

CREATE TRIGGER execution_claims_cache_changed AFTER UPDATE ON pgonce.execution_claims FOR EACH ROW WHEN (((old.state = 'done'::text) AND ((old.expires_at IS NULL) OR (old.expires_at > now())) AND ((new.key <> old.key) OR (new.state <> 'done'::text) OR ((new.expires_at IS NOT NULL) AND ((old.expires_at IS NULL) OR (new.expires_at < old.expires_at)))))) EXECUTE FUNCTION pgonce._cache_fact_ended();

CREATE CONSTRAINT TRIGGER execution_claims_cache_changed_flush AFTER UPDATE ON pgonce.execution_claims DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (((old.state = 'done'::text) AND ((old.expires_at IS NULL) OR (old.expires_at > now())) AND ((new.key <> old.key) OR (new.state <> 'done'::text) OR ((new.expires_at IS NOT NULL) AND ((old.expires_at IS NULL) OR (new.expires_at < old.expires_at)))))) EXECUTE FUNCTION pgonce._cache_flush();

CREATE TRIGGER execution_claims_cache_deleted AFTER DELETE ON pgonce.execution_claims FOR EACH ROW WHEN (((old.state = 'done'::text) AND ((old.expires_at IS NULL) OR (old.expires_at > now())))) EXECUTE FUNCTION pgonce._cache_fact_ended();

CREATE CONSTRAINT TRIGGER execution_claims_cache_deleted_flush AFTER DELETE ON pgonce.execution_claims DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (((old.state = 'done'::text) AND ((old.expires_at IS NULL) OR (old.expires_at > now())))) EXECUTE FUNCTION pgonce._cache_flush();

CREATE TRIGGER execution_claims_cache_truncated AFTER TRUNCATE ON pgonce.execution_claims FOR EACH STATEMENT EXECUTE FUNCTION pgonce._cache_truncated();

CREATE TRIGGER jobs_finished AFTER UPDATE OF state ON pgonce.jobs FOR EACH ROW WHEN ((pgonce._is_terminal(new.state) AND (NOT pgonce._is_terminal(old.state)) AND ((new.dedup_key IS NOT NULL) OR new.has_dependents))) EXECUTE FUNCTION pgonce._job_finished();

CREATE TRIGGER jobs_removed BEFORE DELETE ON pgonce.jobs FOR EACH ROW WHEN ((old.has_dependents AND (old.state <> 'completed'::text))) EXECUTE FUNCTION pgonce._job_removed();

CREATE TRIGGER processed_effects_cache_changed AFTER UPDATE OF effect_key, recorded_at ON pgonce.processed_effects FOR EACH ROW WHEN (((new.effect_key <> old.effect_key) OR (new.recorded_at < old.recorded_at))) EXECUTE FUNCTION pgonce._cache_fact_ended();

CREATE CONSTRAINT TRIGGER processed_effects_cache_changed_flush AFTER UPDATE OF effect_key, recorded_at ON pgonce.processed_effects DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (((new.effect_key <> old.effect_key) OR (new.recorded_at < old.recorded_at))) EXECUTE FUNCTION pgonce._cache_flush();

CREATE TRIGGER processed_effects_cache_deleted AFTER DELETE ON pgonce.processed_effects FOR EACH ROW WHEN (pgonce._cache_effect_unprunable(old.recorded_at)) EXECUTE FUNCTION pgonce._cache_fact_ended();

CREATE CONSTRAINT TRIGGER processed_effects_cache_deleted_flush AFTER DELETE ON pgonce.processed_effects DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (pgonce._cache_effect_unprunable(old.recorded_at)) EXECUTE FUNCTION pgonce._cache_flush();

CREATE TRIGGER processed_effects_cache_truncated AFTER TRUNCATE ON pgonce.processed_effects FOR EACH STATEMENT EXECUTE FUNCTION pgonce._cache_truncated();

CREATE TRIGGER settings_cache_retention AFTER INSERT OR UPDATE OF ledger_retention_ms ON pgonce.settings FOR EACH ROW WHEN ((new.ledger_retention_ms IS NOT NULL)) EXECUTE FUNCTION pgonce._cache_fact_ended();

CREATE CONSTRAINT TRIGGER settings_cache_retention_flush AFTER INSERT OR UPDATE OF ledger_retention_ms ON pgonce.settings DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN ((new.ledger_retention_ms IS NOT NULL)) EXECUTE FUNCTION pgonce._cache_flush();

create view pgonce.failed_jobs as
 SELECT jobs.id,
    jobs.queue,
    jobs.name,
    jobs.job_id,
    jobs.attempts,
    jobs.max_attempts,
    jobs.last_error,
    jobs.error_stack,
    jobs.finished_at,
    jobs.data
   FROM pgonce.jobs
  WHERE jobs.state = 'failed'::text;

create view pgonce.held_keys as
 SELECT k.queue,
    k.key,
    k.job_id,
    o.state AS job_state,
    k.expires_at
   FROM pgonce.dedup_keys k
     JOIN pgonce.jobs o ON o.id = k.job_id
  WHERE pgonce._key_held(k.expires_at, o.state);

create view pgonce.job_counts as
 SELECT jobs.queue,
        CASE
            WHEN jobs.state = 'delayed'::text AND jobs.run_at <= now() THEN 'waiting'::text
            ELSE jobs.state
        END AS state,
    count(*) AS jobs
   FROM pgonce.jobs
  GROUP BY jobs.queue, (
        CASE
            WHEN jobs.state = 'delayed'::text AND jobs.run_at <= now() THEN 'waiting'::text
            ELSE jobs.state
        END);
