--! Previous: sha1:9a011953af50400878be22a6f6d4a0db63d48cad
--! Hash: sha1:cd7368857a7fe5d6540bd3f3fbb8a1ed47e4e589
--! Message: redis cache epochs and invalidation

-- The optional Redis layer's invalidation (docs/redis.md; the whole argument is in src/cache/invalidation.ts): Postgres says
-- when a fact the cache may hold has ended, whoever ended it (pgonce with or without Redis, psql, another program).
--
-- Every cache identity ('k <queue> <key>' for a dedup key, 'e <key>' for a ledger row, 'c <key>' for a runOnce
-- claim) falls into one of 256 buckets, and each bucket has an epoch. A change that ends a cacheable fact notes its
-- bucket in the transaction (a transaction-local setting); when the transaction commits, a deferred trigger bumps
-- every noted bucket in bucket order (row locks taken only at commit and in one order: no new deadlock for the
-- transactions that end facts) and NOTIFYs '!cache <bucket> <epoch>' while a cache listener holds the listener slot.
-- Cached entries are named after the epoch read in the same snapshot as their fact, so a bump makes every older entry
-- of the bucket unreachable at once.
--
-- Cacheable facts, and what ends them:
--   a dedup key held with a TTL   deleted, moved to another job or key, or its expiry brought forward or removed
--   a processed_effects row       deleted before ledger retention could prune it; its recorded_at moved earlier; the
--                                 retention set or shortened (every bucket)
--   a done execution claim        deleted or changed while unexpired, or its expiry brought forward
--   any of the three tables       TRUNCATE (every bucket)
-- Expired keys and claims, and ledger rows past retention, end nothing: entries carry their fact's end and are not
-- answered past it.

create table :PGONCE_SCHEMA.cache_epochs (
  bucket  smallint primary key check (bucket between 0 and 255),
  epoch   bigint not null
);
comment on table :PGONCE_SCHEMA.cache_epochs is
  'The Redis layer''s epoch of each bucket of cache identities, bumped when a cacheable fact of the bucket ends (microseconds since 1970 or more: never reused after a restore).';
insert into :PGONCE_SCHEMA.cache_epochs (bucket, epoch)
select b, (extract(epoch from clock_timestamp()) * 1000000)::bigint from generate_series(0, 255) b;

-- Which database the Redis keys belong to (src/cache/keys.ts): two databases that share a Redis and a schema name
-- never read each other's keys. A copy restored elsewhere keeps it: give the copy its own Redis, or a new value.
alter table :PGONCE_SCHEMA.settings add column cache_instance text not null
  default substr(md5(random()::text || clock_timestamp()::text), 1, 12);

-- The bucket of a cache identity: the first byte of its SHA-256 in UTF-8 (src/cache/keys.ts computes the same).
create function :PGONCE_SCHEMA._cache_bucket(p_ident text) returns integer
language sql stable parallel safe as $$
  select get_byte(sha256(convert_to(p_ident, 'UTF8')), 0)
$$;

-- A cache listener holds this advisory lock shared for its session; a bump NOTIFYs only while one does.
create function :PGONCE_SCHEMA._cache_listener_key() returns bigint
language sql immutable parallel safe as $$
  select hashtextextended(:PGONCE_CHANNEL || ':cache-listener', 0)
$$;

-- The transaction-local setting listing the buckets to bump at commit, as ',3,17,'.
create function :PGONCE_SCHEMA._cache_pending_setting() returns text
language sql immutable parallel safe as $$
  select 'pgonce_cache.' || substr(:PGONCE_CHANNEL, 8)
$$;

-- Notes bucket p_bucket (null: every bucket) for the bump at commit.
create function :PGONCE_SCHEMA._cache_note(p_bucket integer) returns void
language plpgsql as $$
declare
  v_setting text := :PGONCE_SCHEMA._cache_pending_setting();
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
$$;

-- Bumps one bucket: a new epoch, never below the clock in microseconds (so that after a restore from backup an epoch
-- is never used twice), and a NOTIFY unless no cache listener holds the slot. The exclusive try-lock, once taken, is
-- held until commit: a listener starting meanwhile waits for this commit before it reads the epochs.
create function :PGONCE_SCHEMA._cache_bump(p_bucket integer) returns bigint
language plpgsql as $$
declare
  v_epoch bigint;
begin
  update :PGONCE_SCHEMA.cache_epochs
  set epoch = greatest(epoch + 1, (extract(epoch from clock_timestamp()) * 1000000)::bigint)
  where bucket = p_bucket
  returning epoch into v_epoch;
  if not pg_try_advisory_xact_lock(:PGONCE_SCHEMA._cache_listener_key()) then
    perform pg_notify(:PGONCE_CHANNEL, '!cache ' || p_bucket || ' ' || v_epoch);
  end if;
  return v_epoch;
end
$$;

-- Deferred (at commit): bumps every noted bucket once, in bucket order. The first firing of a transaction does them all.
create function :PGONCE_SCHEMA._cache_flush() returns trigger
language plpgsql as $$
declare
  v_setting text := :PGONCE_SCHEMA._cache_pending_setting();
  v_pending text := coalesce(current_setting(v_setting, true), '');
  v_bucket integer;
begin
  if v_pending not in ('', ',') then
    perform set_config(v_setting, ',', true);
    for v_bucket in
      select distinct b::integer from unnest(string_to_array(trim(both ',' from v_pending), ',')) b order by 1
    loop
      perform :PGONCE_SCHEMA._cache_bump(v_bucket);
    end loop;
  end if;
  return null;
end
$$;

-- Bumps every bucket at once (and NOTIFYs '!cache *': listeners read every epoch again), above p_floor. For operators
-- after restoring pgonce's schema from a backup into a running server; pgonce calls it itself when it finds the
-- server restarted or an epoch gone backwards.
create function :PGONCE_SCHEMA.invalidate_cache(p_floor bigint default 0) returns bigint
language plpgsql as $$
declare
  v_epoch bigint;
begin
  perform 1 from :PGONCE_SCHEMA.cache_epochs order by bucket for update;
  update :PGONCE_SCHEMA.cache_epochs
  set epoch = greatest(epoch + 1, (extract(epoch from clock_timestamp()) * 1000000)::bigint, coalesce(p_floor, 0) + 1);
  select max(epoch) into v_epoch from :PGONCE_SCHEMA.cache_epochs;
  perform pg_notify(:PGONCE_CHANNEL, '!cache *');
  return v_epoch;
end
$$;

-- What the cache needs to know after an add (sql/add-job-cached.sql), read after add_job() in one fresh snapshot:
-- whether job p_job_id (the one the answer names) holds the key with a TTL and until when, the bucket's epoch, whether
-- this transaction bumps the bucket at commit, and the database clock.
create function :PGONCE_SCHEMA._cache_key_state(p_queue text, p_key text, p_job_id bigint,
  out owned boolean, out key_expires_ms double precision, out epoch bigint, out will_bump boolean, out now_ms double precision)
returns record
language plpgsql volatile as $$
declare
  v_bucket integer := :PGONCE_SCHEMA._cache_bucket('k ' || p_queue || ' ' || p_key);
begin
  select k.job_id is not null, (extract(epoch from k.expires_at) * 1000)::float8, c.epoch,
    position(',' || v_bucket || ',' in coalesce(current_setting(:PGONCE_SCHEMA._cache_pending_setting(), true), '')) > 0,
    (extract(epoch from clock_timestamp()) * 1000)::float8
  into owned, key_expires_ms, epoch, will_bump, now_ms
  from :PGONCE_SCHEMA.cache_epochs c
  left join :PGONCE_SCHEMA.dedup_keys k
    on k.queue = p_queue and k.key = p_key and k.job_id = p_job_id and k.expires_at > now()
  where c.bucket = v_bucket;
end
$$;

-- The trigger of every end below: notes the bucket of the fact the OLD row stood for (on settings: every bucket).
create function :PGONCE_SCHEMA._cache_fact_ended() returns trigger
language plpgsql as $$
begin
  if tg_table_name = 'dedup_keys' then
    perform :PGONCE_SCHEMA._cache_note(:PGONCE_SCHEMA._cache_bucket('k ' || old.queue || ' ' || old.key));
  elsif tg_table_name = 'processed_effects' then
    perform :PGONCE_SCHEMA._cache_note(:PGONCE_SCHEMA._cache_bucket('e ' || old.effect_key));
  elsif tg_table_name = 'execution_claims' then
    perform :PGONCE_SCHEMA._cache_note(:PGONCE_SCHEMA._cache_bucket('c ' || old.key));
  else
    perform :PGONCE_SCHEMA._cache_note(null);
  end if;
  return null;
end
$$;

-- ---------------------------------------------------------------------------------------------------------------
-- dedup_keys: a held TTL key ends.

create trigger dedup_keys_cache_deleted after delete on :PGONCE_SCHEMA.dedup_keys
  for each row when (old.expires_at > now())
  execute function :PGONCE_SCHEMA._cache_fact_ended();
create constraint trigger dedup_keys_cache_deleted_flush after delete on :PGONCE_SCHEMA.dedup_keys
  deferrable initially deferred
  for each row when (old.expires_at > now())
  execute function :PGONCE_SCHEMA._cache_flush();
create trigger dedup_keys_cache_changed after update of queue, key, job_id, expires_at on :PGONCE_SCHEMA.dedup_keys
  for each row when (old.expires_at > now() and (new.queue <> old.queue or new.key <> old.key or new.job_id <> old.job_id
    or new.expires_at is null or new.expires_at < old.expires_at))
  execute function :PGONCE_SCHEMA._cache_fact_ended();
create constraint trigger dedup_keys_cache_changed_flush after update of queue, key, job_id, expires_at on :PGONCE_SCHEMA.dedup_keys
  deferrable initially deferred
  for each row when (old.expires_at > now() and (new.queue <> old.queue or new.key <> old.key or new.job_id <> old.job_id
    or new.expires_at is null or new.expires_at < old.expires_at))
  execute function :PGONCE_SCHEMA._cache_flush();

-- ---------------------------------------------------------------------------------------------------------------
-- processed_effects: a ledger row ends before retention could prune it (prune-ledger.sql's own cutoff).
create function :PGONCE_SCHEMA._cache_effect_unprunable(p_recorded_at timestamptz) returns boolean
language sql stable as $$
  select coalesce((select p_recorded_at >= now() - make_interval(secs => s.ledger_retention_ms / 1000.0)
                   from :PGONCE_SCHEMA.settings s), true)
$$;

create trigger processed_effects_cache_deleted after delete on :PGONCE_SCHEMA.processed_effects
  for each row when (:PGONCE_SCHEMA._cache_effect_unprunable(old.recorded_at))
  execute function :PGONCE_SCHEMA._cache_fact_ended();
create constraint trigger processed_effects_cache_deleted_flush after delete on :PGONCE_SCHEMA.processed_effects
  deferrable initially deferred
  for each row when (:PGONCE_SCHEMA._cache_effect_unprunable(old.recorded_at))
  execute function :PGONCE_SCHEMA._cache_flush();
create trigger processed_effects_cache_changed after update of effect_key, recorded_at on :PGONCE_SCHEMA.processed_effects
  for each row when (new.effect_key <> old.effect_key or new.recorded_at < old.recorded_at)
  execute function :PGONCE_SCHEMA._cache_fact_ended();
create constraint trigger processed_effects_cache_changed_flush after update of effect_key, recorded_at on :PGONCE_SCHEMA.processed_effects
  deferrable initially deferred
  for each row when (new.effect_key <> old.effect_key or new.recorded_at < old.recorded_at)
  execute function :PGONCE_SCHEMA._cache_flush();

-- settings: a ledger retention set or changed (shortened, or set where there was none, makes rows prunable sooner
-- than their entries say; a longer one is bumped too, harmlessly: the trigger cannot compare with OLD on insert).
create trigger settings_cache_retention after insert or update of ledger_retention_ms on :PGONCE_SCHEMA.settings
  for each row when (new.ledger_retention_ms is not null)
  execute function :PGONCE_SCHEMA._cache_fact_ended();
create constraint trigger settings_cache_retention_flush after insert or update of ledger_retention_ms on :PGONCE_SCHEMA.settings
  deferrable initially deferred
  for each row when (new.ledger_retention_ms is not null)
  execute function :PGONCE_SCHEMA._cache_flush();

-- ---------------------------------------------------------------------------------------------------------------
-- execution_claims: a done marker ends while unexpired.
create trigger execution_claims_cache_deleted after delete on :PGONCE_SCHEMA.execution_claims
  for each row when (old.state = 'done' and (old.expires_at is null or old.expires_at > now()))
  execute function :PGONCE_SCHEMA._cache_fact_ended();
create constraint trigger execution_claims_cache_deleted_flush after delete on :PGONCE_SCHEMA.execution_claims
  deferrable initially deferred
  for each row when (old.state = 'done' and (old.expires_at is null or old.expires_at > now()))
  execute function :PGONCE_SCHEMA._cache_flush();
create trigger execution_claims_cache_changed after update on :PGONCE_SCHEMA.execution_claims
  for each row when (old.state = 'done' and (old.expires_at is null or old.expires_at > now())
    and (new.key <> old.key or new.state <> 'done'
      or (new.expires_at is not null and (old.expires_at is null or new.expires_at < old.expires_at))))
  execute function :PGONCE_SCHEMA._cache_fact_ended();
create constraint trigger execution_claims_cache_changed_flush after update on :PGONCE_SCHEMA.execution_claims
  deferrable initially deferred
  for each row when (old.state = 'done' and (old.expires_at is null or old.expires_at > now())
    and (new.key <> old.key or new.state <> 'done'
      or (new.expires_at is not null and (old.expires_at is null or new.expires_at < old.expires_at))))
  execute function :PGONCE_SCHEMA._cache_flush();

-- ---------------------------------------------------------------------------------------------------------------
-- TRUNCATE of any of the three tables (also through TRUNCATE jobs CASCADE) ends everything.
create function :PGONCE_SCHEMA._cache_truncated() returns trigger
language plpgsql as $$
begin
  perform :PGONCE_SCHEMA.invalidate_cache();
  return null;
end
$$;

create trigger dedup_keys_cache_truncated after truncate on :PGONCE_SCHEMA.dedup_keys
  for each statement execute function :PGONCE_SCHEMA._cache_truncated();
create trigger processed_effects_cache_truncated after truncate on :PGONCE_SCHEMA.processed_effects
  for each statement execute function :PGONCE_SCHEMA._cache_truncated();
create trigger execution_claims_cache_truncated after truncate on :PGONCE_SCHEMA.execution_claims
  for each statement execute function :PGONCE_SCHEMA._cache_truncated();
