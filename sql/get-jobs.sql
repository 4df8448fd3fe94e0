-- A page of queue $1's jobs, newest first (by id): in states $2 (null: any), at most $3, with ids below $4 (null: from
-- the newest). Walks the primary key backwards: a page of a state that is rare among many jobs reads past the others.
select * from :PGONCE_SCHEMA.jobs
where queue = $1 and ($2::text[] is null or state = any($2::text[])) and ($4::bigint is null or id < $4::bigint)
order by id desc
limit $3
