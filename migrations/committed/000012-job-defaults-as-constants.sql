--! Previous: sha1:6a412b3ae86418b86e2385bdb51e8370c5d45454
--! Hash: sha1:c46ffa6d05f8589c5128c79b30f0bb64d39c2383
--! Message: job defaults as constants

-- The job defaults as scalar functions, so that the jobs table's column defaults are constants. A column default of
-- (_job_defaults()).priority called the record-returning plpgsql function for every row inserted without that column
-- (twice a row: priority and max_attempts): PostgreSQL does not fold a call that returns a record at plan time. A
-- 200,000-row INSERT that leaves both to their defaults took 1.31-1.49 s against 0.74-0.77 s with constant defaults
-- (bench/README.md, "Job defaults folded"). pgonce's own adds name both columns; an INSERT written by hand, and the
-- bench's physical-limit probes, did not. The values stay in one place: the scalar functions below, which
-- _job_defaults() returns.

create function :PGONCE_SCHEMA._default_priority() returns integer
language sql immutable parallel safe as $$
  select 0
$$;

create function :PGONCE_SCHEMA._default_max_attempts() returns integer
language sql immutable parallel safe as $$
  select 1
$$;

create or replace function :PGONCE_SCHEMA._job_defaults(out priority integer, out max_attempts integer)
language plpgsql immutable parallel safe as $$
begin
  priority := :PGONCE_SCHEMA._default_priority();
  max_attempts := :PGONCE_SCHEMA._default_max_attempts();
end
$$;

alter table :PGONCE_SCHEMA.jobs
  alter column priority set default :PGONCE_SCHEMA._default_priority(),
  alter column max_attempts set default :PGONCE_SCHEMA._default_max_attempts();
