-- The parents (kind 'parent': jobs job $1 depends on) and children (kind 'child': jobs depending on it) of job $1, at
-- most $2 of each, and its dedup key rows (kind 'key'). Primary key of job_dependencies, job_dependencies_parent and
-- dedup_keys_job.
(select 'parent' as kind, p.id::text as id, p.name, p.state, null::text as key, null::timestamptz as expires_at,
        null::boolean as held
 from :PGONCE_SCHEMA.job_dependencies d join :PGONCE_SCHEMA.jobs p on p.id = d.depends_on
 where d.job_id = $1 order by p.id limit $2)
union all
(select 'child', c.id::text, c.name, c.state, null, null, null
 from :PGONCE_SCHEMA.job_dependencies d join :PGONCE_SCHEMA.jobs c on c.id = d.job_id
 where d.depends_on = $1 order by c.id limit $2)
union all
(select 'key', k.queue, null, o.state, k.key, k.expires_at, :PGONCE_SCHEMA._key_held(k.expires_at, o.state)
 from :PGONCE_SCHEMA.dedup_keys k join :PGONCE_SCHEMA.jobs o on o.id = k.job_id
 where k.job_id = $1 limit $2)
