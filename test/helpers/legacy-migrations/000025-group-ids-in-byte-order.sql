--! Previous: sha1:04fa46f6810a220915dd58dee759e2668d5e7567
--! Hash: sha1:53d927921512a0d5a5caf2bbc04825a4fc902598
--! Message: group-ids-in-byte-order

-- Group ids compare byte by byte (collation "C"): a grouped claim walks the groups with queued jobs, one descent of
-- jobs_group_due each, and reads each one's slot rows; under the database's collation every comparison of two ids on
-- the way down went through the locale's string comparison (the claim took ~1.4x as long with 1,000 groups). The
-- views that read group_id are made again around the change of type.
drop view :PGONCE_SCHEMA.held_jobs;
drop view :PGONCE_SCHEMA.queue_limits;
alter table :PGONCE_SCHEMA.jobs alter column group_id type text collate "C";
alter table :PGONCE_SCHEMA.limit_slots alter column group_id type text collate "C";
alter table :PGONCE_SCHEMA.limit_rate_slots alter column group_id type text collate "C";
alter table :PGONCE_SCHEMA.limit_groups alter column group_id type text collate "C";

create view :PGONCE_SCHEMA.queue_limits as
select s.queue, s.concurrency, s.rate_max, s.rate_duration_ms, s.rate_paused_until,
  (select count(*) from :PGONCE_SCHEMA.limit_slots l
   where l.queue = s.queue and l.group_id = '' and l.job_id is not null)::integer as slots_in_use,
  (select count(*) from :PGONCE_SCHEMA.limit_rate_slots r
   where r.queue = s.queue and r.group_id = '' and r.slot <= s.rate_max
     and r.used_at > now() - make_interval(secs => s.rate_duration_ms / 1000.0))::integer as rate_used,
  s.group_concurrency, s.group_rate_max, s.group_rate_duration_ms,
  (select count(*) from :PGONCE_SCHEMA.limit_slots l
   where l.queue = s.queue and l.group_id <> '' and l.job_id is not null)::integer as group_slots_in_use
from :PGONCE_SCHEMA.queue_settings s
where s.concurrency is not null or s.rate_max is not null or s.rate_paused_until > now()
  or :PGONCE_SCHEMA._grouped(s);

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
      when j.group_id is null then null
      when exists (
        select 1 from :PGONCE_SCHEMA.limit_groups g
        where g.queue = j.queue and g.group_id = j.group_id and g.paused_until > now()) then 'group ctx.rateLimit'
      when s.group_concurrency is not null and (
        select count(*) from :PGONCE_SCHEMA.limit_slots l
        where l.queue = j.queue and l.group_id = j.group_id and l.slot <= s.group_concurrency
          and l.job_id is not null) >= s.group_concurrency
        then 'group concurrency'
      when s.group_rate_max is not null and (
        select count(*) from :PGONCE_SCHEMA.limit_rate_slots r
        where r.queue = j.queue and r.group_id = j.group_id and r.slot <= s.group_rate_max
          and r.used_at > now() - make_interval(secs => s.group_rate_duration_ms / 1000.0)) >= s.group_rate_max
        then 'group rate'
    end as held_by
  from :PGONCE_SCHEMA.jobs j join :PGONCE_SCHEMA.queue_settings s on s.queue = j.queue
  where :PGONCE_SCHEMA._is_queued(j.state) and j.run_at <= now()
) h
where h.held_by is not null;
