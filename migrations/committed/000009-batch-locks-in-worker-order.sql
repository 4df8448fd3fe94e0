--! Previous: sha1:272f1dd374989647b894c53d0930e7c3f9d208ba
--! Hash: sha1:d49142f98b79f00398cec6dc0d18fcfced259b0b
--! Message: batch locks in worker order

-- A batch takes its rows in the order a worker's statements take them. A worker's multi-row statements (heartbeats,
-- starts, completions, releases) lock job rows in ascending id order, and a completion's jobs_finished trigger then
-- deletes the finished jobs' no-TTL keys, after the statement has locked all its job rows. _add_jobs() decided its
-- items one by one in input order, each locking what it touched: a pending owner it superseded, its dependsOn
-- parents, the key row it replaced or extended. Two items in descending id order beside a heartbeat or a completion
-- over the same jobs deadlocked (SQLSTATE 40P01; the victim was either the worker's statement, retried, or the
-- caller's addBulk). test/queue.add-bulk-lock-order.test.ts reproduces the three shapes.

-- Locks, before a batch decides anything, the rows its items may change, in the worker's order: first the job rows in
-- ascending id, the pending owners of the keys it replaces (FOR UPDATE: they are deleted) and its dependsOn parents
-- (FOR SHARE, as _admit_one takes them), then the dedup_keys rows of the keys it replaces or extends, in their owners'
-- id order. An owner read here may change before its item is decided (a single add takes no batch lock): the items
-- still decide on what they read then; these locks only set the order.
create function :PGONCE_SCHEMA._lock_batch_rows(
  p_queue text, p_dedup_ids text[], p_extends boolean[], p_replaces boolean[], p_depends_on text[]
) returns void
language plpgsql volatile as $$
declare
  r record;
begin
  for r in
    select w.id, bool_or(w.owner) as owner
    from (select k.job_id as id, true as owner
          from unnest(p_dedup_ids, p_replaces) i(d, rep)
          join :PGONCE_SCHEMA.dedup_keys k on k.queue = p_queue and k.key = i.d
          where i.rep
          union all
          select p.id, false from unnest(p_depends_on) d(ids), unnest(d.ids::bigint[]) p(id)) w
    group by w.id
    order by w.id
  loop
    if r.owner then
      perform 1 from :PGONCE_SCHEMA.jobs where id = r.id and :PGONCE_SCHEMA._is_pending(state) for update;
    else
      perform 1 from :PGONCE_SCHEMA.jobs where id = r.id for share;
    end if;
  end loop;
  perform 1 from :PGONCE_SCHEMA.dedup_keys k
  where k.queue = p_queue
    and k.key in (select i.d from unnest(p_dedup_ids, p_extends, p_replaces) i(d, x, rep) where i.x or i.rep)
  order by k.job_id, k.key
  for update;
end
$$;

-- As in 000004, but a batch that can supersede, extend or depend (the batches that pay for a savepoint) first takes
-- its rows with _lock_batch_rows().
create or replace function :PGONCE_SCHEMA._add_jobs(
  p_queue text, p_names text[], p_datas jsonb[], p_job_ids text[], p_dedup_ids text[], p_dedup_ttls_ms bigint[],
  p_extends boolean[], p_replaces boolean[], p_delays_ms bigint[], p_priorities integer[], p_max_attempts integer[],
  p_backoffs jsonb[], p_depends_on text[], p_trace_contexts text[]
) returns setof :PGONCE_SCHEMA.admission
language plpgsql volatile as $$
declare
  v_answers :PGONCE_SCHEMA.admission[];
  v_last :PGONCE_SCHEMA.admission;
begin
  perform pg_advisory_xact_lock(hashtextextended(:PGONCE_CHANNEL || ':admit:' || l.k, 0))
  from (
    select distinct k from (
      select 'k:' || p_queue || ':' || d as k from unnest(p_dedup_ids) d where d is not null
      union all
      select 'j:' || j from unnest(p_job_ids) j where j is not null) x
    order by k
  ) l
  where (select count(*) from unnest(p_dedup_ids) d where d is not null)
      + (select count(*) from unnest(p_job_ids) j where j is not null) > 1;
  -- Only extend, replace and dependsOn can be rejected, and a rejected item writes nothing itself: the savepoint
  -- (a subtransaction) is paid only by batches in which an earlier item may have to be undone.
  if coalesce(cardinality(p_names), 0) > 1 and (true = any(p_extends) or true = any(p_replaces)
      or exists (select 1 from unnest(p_depends_on) d where d is not null)) then
    perform :PGONCE_SCHEMA._lock_batch_rows(p_queue, p_dedup_ids, p_extends, p_replaces, p_depends_on);
    begin
      v_answers := :PGONCE_SCHEMA._admit_batch(p_queue, p_names, p_datas, p_job_ids, p_dedup_ids, p_dedup_ttls_ms,
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
    v_answers := :PGONCE_SCHEMA._admit_batch(p_queue, p_names, p_datas, p_job_ids, p_dedup_ids, p_dedup_ttls_ms,
      p_extends, p_replaces, p_delays_ms, p_priorities, p_max_attempts, p_backoffs, p_depends_on, p_trace_contexts);
    v_last := v_answers[cardinality(v_answers)];
    if v_last.error is not null then
      return next v_last;
      return;
    end if;
  end if;

  if exists (select 1 from unnest(v_answers) a
             where a.outcome in ('added', 'replaced') and :PGONCE_SCHEMA._is_queued((a.job).state)) then
    perform :PGONCE_SCHEMA._wake(p_queue);
  end if;
  return query select * from unnest(v_answers) order by 1;
end
$$;
