--! Previous: sha1:dc90908ec7279716c9ecb5fd09b4f535dcf080ac
--! Hash: sha1:bf3778d6a9305e9ab0f8633797bfa4437e84bbdb
--! Message: cache listener leases and settled removals

-- The Redis layer's answer to the ends of cached facts that Redis never hears of: a removal by a process without
-- `redis`, SQL by hand (docs/redis.md, "How it stays right"; the argument is at the top of src/cache/invalidation.ts).
--
-- A process answers from Redis only while two leases of its cache listener last (src/cache/listener-lease.ts): it has
-- heard, within the last 100 ms (_cache_settle_interval_ms), a heartbeat NOTIFY it sent itself, so it has heard every
-- NOTIFY committed before that heartbeat was sent; and its row in cache_listeners, refreshed every 10 s, has not run
-- out. A change that ends a cached fact therefore only has to wait 100 ms after its commit, while any row lasts, for no
-- process to answer that fact again. pgonce's statements that may end a fact say how long in their answer
-- (_cache_settle_ms), and wait after their commit; wait_for_caches() and the procedure remove_dedup_key() do it for SQL.

create table :PGONCE_SCHEMA.cache_listeners (
  listener       text primary key,
  trusted_until  timestamptz not null
);
comment on table :PGONCE_SCHEMA.cache_listeners is
  'The processes whose cache listener may answer from Redis, each at most until trusted_until (src/cache/listener-lease.ts): while a row lasts, a change that ends a cached fact waits 100 ms after its commit before it reports success.';

-- How long after a commit every process has heard it or stopped answering from Redis (src/cache/listener-lease.ts
-- trusts a heartbeat for no longer).
create function :PGONCE_SCHEMA._cache_settle_interval_ms() returns integer
language sql immutable parallel safe as $$
  select 100
$$;

-- Whether any process may be answering from Redis now: a row of cache_listeners whose lease lasts.
create function :PGONCE_SCHEMA._cache_leases_last() returns boolean
language sql stable as $$
  select exists (select 1 from :PGONCE_SCHEMA.cache_listeners where trusted_until > now())
$$;

-- Taken shared by a statement that decides whether its caller waits (_cache_settle_ms), until it commits. A cache
-- listener takes it exclusively once, after writing its row and before reading the epochs (sql/cache-listen.sql): a
-- listener that statement could not see reads the epochs after its commit, so it never needs the wait.
create function :PGONCE_SCHEMA._cache_settle_key() returns bigint
language sql immutable parallel safe as $$
  select hashtextextended(:PGONCE_CHANNEL || ':cache-settle', 0)
$$;

-- Whether this transaction bumps a bucket at commit: it ended a cached fact (read once the row triggers have fired,
-- e.g. after a function that made the change).
create function :PGONCE_SCHEMA._cache_bumps_pending() returns boolean
language sql volatile as $$
  select coalesce(current_setting(:PGONCE_SCHEMA._cache_pending_setting(), true), '') not in ('', ',')
$$;

-- How long the caller waits after this transaction commits before it reports success: the settle interval when
-- p_ends (this transaction ends a cached fact at commit) while any listener's lease lasts, else 0. For statements of
-- their own transaction only: the lock it takes lasts until the commit.
create function :PGONCE_SCHEMA._cache_settle_ms(p_ends boolean) returns integer
language plpgsql volatile as $$
begin
  if not coalesce(p_ends, false) then
    return 0;
  end if;
  perform pg_advisory_xact_lock_shared(:PGONCE_SCHEMA._cache_settle_key());
  if :PGONCE_SCHEMA._cache_leases_last() then
    return :PGONCE_SCHEMA._cache_settle_interval_ms();
  end if;
  return 0;
end
$$;

-- For SQL by hand, after a COMMIT that removed keys, ledger rows or done markers: returns once no process answers
-- from Redis what that commit ended (100 ms while any cache listener's lease lasts, else at once); the ms it waited.
create function :PGONCE_SCHEMA.wait_for_caches() returns integer
language plpgsql volatile as $$
begin
  if :PGONCE_SCHEMA._cache_leases_last() then
    perform pg_sleep(:PGONCE_SCHEMA._cache_settle_interval_ms() / 1000.0);
    return :PGONCE_SCHEMA._cache_settle_interval_ms();
  end if;
  return 0;
end
$$;
comment on function :PGONCE_SCHEMA.wait_for_caches() is
  'Call after the COMMIT of a change made by hand that ended cached facts (a deleted key, ledger row or done marker): returns once no process answers them from Redis. docs/redis.md';

-- The SQL API's removal of a dedup key, whoever owns it (queue.removeDeduplicationKey): deletes it, commits, and
-- waits until no process answers it from Redis. removed: a held key was removed. CALL it outside a transaction block
-- (it commits; inside one, PostgreSQL refuses with "invalid transaction termination").
create procedure :PGONCE_SCHEMA.remove_dedup_key(queue text, key text, inout removed boolean default null)
language plpgsql as $$
declare
  v_ended boolean;
begin
  with gone as (
    delete from :PGONCE_SCHEMA.dedup_keys k
    where k.queue = remove_dedup_key.queue and k.key = remove_dedup_key.key and :PGONCE_SCHEMA._keep_index(k.job_id)
    returning k.job_id, k.expires_at
  )
  select exists (
           select 1 from gone g join :PGONCE_SCHEMA.jobs o on o.id = g.job_id
           where :PGONCE_SCHEMA._key_held(g.expires_at, o.state) and :PGONCE_SCHEMA._keep_index(o.id)),
         exists (select 1 from gone g where g.expires_at > now())
  into removed, v_ended;
  commit;
  if v_ended then
    perform :PGONCE_SCHEMA.wait_for_caches();
  end if;
end
$$;
comment on procedure :PGONCE_SCHEMA.remove_dedup_key(text, text, boolean) is
  'CALL remove_dedup_key(queue, key): deletes the dedup key, commits, and returns once no process answers it from Redis; removed: a held key was removed. docs/redis.md';
