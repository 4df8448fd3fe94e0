--! Previous: sha1:cbe55149915d30247b28f29dcc8c13a7fdf8cd2c
--! Hash: sha1:728d7e0ac6f996346c6a66347330c34e7c79a36e
--! Message: add_plain_jobs: addBulk fast path for plain items

-- addBulk's fast path: add_plain_jobs() inserts a batch of plain items (no
-- jobId, no dedup key, no dependency) with one INSERT ... SELECT and answers
-- with one row instead of one job per item.

create function :PGONCE_SCHEMA._reject_plain_item(p_item jsonb) returns text
language plpgsql as $$
begin
  raise exception 'pgonce: add_plain_jobs() takes objects with keys name, data, delayMs, priority, attempts, backoff only; use add_jobs() for jobId, dedupId or dependsOn (item: %)',
    left(p_item::text, 200)
    using errcode = '22023';
end
$$;

-- addBulk of plain items: one statement, all or nothing. p_items is a jsonb
-- array of objects with keys name (required), data (default {}), delayMs,
-- priority, attempts, backoff — add_jobs()'s keys without jobId, dedupId,
-- dependsOn and at. An item with any other key, or that is not an object, is
-- refused (SQLSTATE 22023) and nothing is inserted, so a jobId or key can never
-- be dropped silently. Ids are drawn in array order. Returns one row: ids, the
-- new job ids in array order, comma-separated ('' for an empty array), and
-- now_ms, now() in ms since the epoch: every job's created_at (run_at is
-- created_at + delayMs; state is 'delayed' when delayMs > 0, else 'waiting';
-- attempts 0). Wakes idle workers as add_jobs() does: NOTIFY when an inserted
-- job is delayed, or when the queue had no due waiting job before this insert.
create function :PGONCE_SCHEMA.add_plain_jobs(p_queue text, p_items jsonb, out ids text, out now_ms float8)
language plpgsql as $$
declare
  v_wake boolean;
begin
  -- The subquery of the wake-up test reads the statement's snapshot, taken
  -- before the INSERT: it sees the due work that was there before this batch.
  with ins as (
    insert into :PGONCE_SCHEMA.jobs (id, queue, name, data, state, run_at, priority, max_attempts, backoff)
    select nextval(':PGONCE_SCHEMA.job_ids'), p_queue,
      case when jsonb_typeof(e.item) = 'object'
                and e.item - '{name,data,delayMs,priority,attempts,backoff}'::text[] = '{}'::jsonb
           then e.item->>'name' else :PGONCE_SCHEMA._reject_plain_item(e.item) end,
      coalesce(e.item->'data', '{}'::jsonb),
      case when coalesce((e.item->>'delayMs')::bigint, 0) > 0 then 'delayed' else 'waiting' end,
      now() + make_interval(secs => coalesce((e.item->>'delayMs')::bigint, 0) / 1000.0),
      coalesce((e.item->>'priority')::integer, 0), coalesce((e.item->>'attempts')::integer, 1),
      e.item->'backoff'
    from jsonb_array_elements(p_items) with ordinality e(item, ord)
    order by e.ord
    returning id, state
  )
  -- nextval() runs in array order, so ordering by id gives array order.
  select coalesce(string_agg(ins.id::text, ',' order by ins.id), ''),
         count(*) > 0 and (coalesce(bool_or(ins.state = 'delayed'), false) or not exists (
           select 1 from :PGONCE_SCHEMA.jobs w
           where w.queue = p_queue and w.state = 'waiting' and w.run_at <= now()))
  into ids, v_wake
  from ins;
  if v_wake then
    perform pg_notify(:PGONCE_CHANNEL, p_queue);
  end if;
  now_ms := (extract(epoch from now()) * 1000)::float8;
end
$$;
