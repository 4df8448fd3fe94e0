-- Deletes a dedup key whoever owns it ($3 null), or only if job $3 owns it.
-- deleted: a row went; held: it was held at that moment (_key_held); cache_settle_ms: how long to wait after the
-- commit before reporting it (a key held with a TTL, which a cache may answer, while a cache listener's lease lasts;
-- $4 false, inside a caller's transaction: 0, and no lock taken).
-- _keep_index(): the index whatever the statistics were when a session planned this (docs/architecture.md).
with gone as (
  delete from :PGONCE_SCHEMA.dedup_keys k
  where k.queue = $1 and k.key = $2 and ($3::bigint is null or k.job_id = $3::bigint)
    and :PGONCE_SCHEMA._keep_index(k.job_id)
  returning k.job_id, k.expires_at
)
select exists (select 1 from gone) as deleted,
       exists (
         select 1 from gone g join :PGONCE_SCHEMA.jobs o on o.id = g.job_id
         where :PGONCE_SCHEMA._key_held(g.expires_at, o.state) and :PGONCE_SCHEMA._keep_index(o.id)
       ) as held,
       :PGONCE_SCHEMA._cache_settle_ms($4::boolean and exists (select 1 from gone g where g.expires_at > now())) as cache_settle_ms
