--! Previous: sha1:e54b962e5729bb0c27ad506ce101e5cd550290e0
--! Hash: sha1:de36b56fbead431505040b8d5b04c603ba27bd4a
--! Message: bulk order and lean results

-- addBulk fixes: items that share a jobId but not a key were answered out of
-- input order (the batch was sorted by key, else jobId). Keyed items are now
-- admitted in array order; queue.addBulk sends them grouped by connected
-- jobIds/keys, groups sorted by their least lock key, which keeps every
-- group's input order and a deterministic lock order across batches. An item
-- may carry "at" (its position in the caller's list) for the ordinal.
-- p_lean: for items added by the set-based path, the job row carries only id,
-- queue, state, run_at and created_at (the caller knows the rest); returning
-- whole rows cost more than the insert itself.

drop function :PGONCE_SCHEMA.add_jobs(text, jsonb);

-- addBulk: one statement, all-or-nothing. Items are jsonb objects with keys
-- name, data, jobId, dedupId, dedupTtlMs, extend, replace, delayMs, priority,
-- attempts, backoff, dependsOn, at. Items without jobId, key or dependencies go
-- in one set-based INSERT; the others are admitted one by one through
-- add_job(), in array order. On a rejection the whole batch is rolled back and
-- a single row carries the error (the caller's transaction stays usable).
-- Concurrent batches avoid deadlocks when each sends its keyed items sorted by
-- the key (else jobId) they lock, as queue.addBulk does.
create function :PGONCE_SCHEMA.add_jobs(p_queue text, p_items jsonb, p_lean boolean default false)
returns setof :PGONCE_SCHEMA.admission
language plpgsql as $$
declare
  v_wake boolean := false;
  v_item jsonb;
  v_ord integer;
  v_res :PGONCE_SCHEMA.admission;
  v_rejected :PGONCE_SCHEMA.admission;
  v_plain :PGONCE_SCHEMA.admission[] := '{}';
  v_ids bigint[];
  v_pos integer[];
  v_keyed :PGONCE_SCHEMA.admission[] := '{}';
begin
  begin
    -- Ids are drawn per item first, so that results can be matched to input
    -- positions by primary key (a join of the INSERT's output to the input
    -- would be planned as a nested loop: quadratic in the batch size).
    select coalesce(array_agg(nextval(':PGONCE_SCHEMA.job_ids') order by e.ord), '{}'),
           coalesce(array_agg(e.ord::integer order by e.ord), '{}')
    into v_ids, v_pos
    from jsonb_array_elements(p_items) with ordinality e(item, ord)
    where e.item->'jobId' is null and e.item->'dedupId' is null and e.item->'dependsOn' is null;

    if cardinality(v_ids) > 0 then
      with ins as (
        insert into :PGONCE_SCHEMA.jobs (id, queue, name, data, state, run_at, priority, max_attempts, backoff)
        select o.id, p_queue, it->>'name', coalesce(it->'data', '{}'::jsonb),
          case when coalesce((it->>'delayMs')::bigint, 0) > 0 then 'delayed' else 'waiting' end,
          now() + make_interval(secs => coalesce((it->>'delayMs')::bigint, 0) / 1000.0),
          coalesce((it->>'priority')::integer, 0), coalesce((it->>'attempts')::integer, 1), it->'backoff'
        from unnest(v_ids, v_pos) o(id, pos), lateral (select p_items->(o.pos - 1) as it) i
        returning state
      )
      select coalesce(bool_or(ins.state = 'delayed'), false) or not exists (
               select 1 from :PGONCE_SCHEMA.jobs w
               where w.queue = p_queue and w.state = 'waiting' and w.run_at <= now())
      into v_wake
      from ins;
      if p_lean then
        -- Only what the caller cannot know: id, state, run_at, created_at.
        select array_agg(row(coalesce((it->>'at')::integer, o.pos), 'added', null,
                 jsonb_populate_record(null:::PGONCE_SCHEMA.jobs, jsonb_build_object(
                   'id', o.id, 'queue', p_queue,
                   'state', case when coalesce((it->>'delayMs')::bigint, 0) > 0 then 'delayed' else 'waiting' end,
                   'run_at', now() + make_interval(secs => coalesce((it->>'delayMs')::bigint, 0) / 1000.0),
                   'created_at', now()))):::PGONCE_SCHEMA.admission)
        into v_plain
        from unnest(v_ids, v_pos) o(id, pos), lateral (select p_items->(o.pos - 1) as it) i;
      else
        select array_agg(row(coalesce((p_items->(o.pos - 1)->>'at')::integer, o.pos), 'added', null, j):::PGONCE_SCHEMA.admission)
        into v_plain
        from unnest(v_ids, v_pos) o(id, pos) join :PGONCE_SCHEMA.jobs j on j.id = o.id;
      end if;
    end if;

    for v_item, v_ord in
      select e.item, coalesce((e.item->>'at')::integer, e.ord::integer)
      from jsonb_array_elements(p_items) with ordinality e(item, ord)
      where e.item->'jobId' is not null or e.item->'dedupId' is not null or e.item->'dependsOn' is not null
      order by e.ord
    loop
      v_res := :PGONCE_SCHEMA.add_job(p_queue, v_item->>'name', coalesce(v_item->'data', '{}'::jsonb),
        v_item->>'jobId', v_item->>'dedupId', (v_item->>'dedupTtlMs')::bigint,
        coalesce((v_item->>'extend')::boolean, false), coalesce((v_item->>'replace')::boolean, false),
        (v_item->>'delayMs')::bigint, (v_item->>'priority')::integer, (v_item->>'attempts')::integer,
        v_item->'backoff',
        (select array_agg(d::bigint) from jsonb_array_elements_text(v_item->'dependsOn') d),
        false);
      v_res.ordinal := v_ord;
      if v_res.error is not null then
        v_rejected := v_res;
        raise exception 'pgonce: batch item % rejected: %', v_ord, v_res.error using errcode = 'PO001';
      end if;
      v_keyed := array_append(v_keyed, v_res);
    end loop;
  exception when sqlstate 'PO001' then
    return next v_rejected;
    return;
  end;

  if v_wake then
    perform pg_notify(:PGONCE_CHANNEL, p_queue);
  end if;
  return query
    select * from unnest(v_plain)
    union all
    select * from unnest(v_keyed)
    order by 1;
end
$$;
