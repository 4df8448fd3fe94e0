-- The failed set of queues $1 grouped by the first line of the error, from the newest $2 failed jobs of each queue
-- (jobs_finished backwards, never more): count, last failure, the newest 20 ids. A queue whose groups add up to $2 had
-- more failed jobs than were read.
select f.queue, f.error, count(*)::integer as count, max(f.finished_at) as last_at,
       (array_agg(f.id::text order by f.finished_at desc, f.id desc))[1:20] as ids
from unnest($1::text[]) as q(queue)
cross join lateral (
  select j.queue, j.id, j.finished_at, coalesce(left(split_part(j.last_error, E'\n', 1), 500), '') as error
  from :PGONCE_SCHEMA.jobs j
  where j.queue = q.queue and j.state = 'failed' and :PGONCE_SCHEMA._is_terminal(j.state)
  order by j.finished_at desc, j.id desc
  limit $2
) f
group by f.queue, f.error
order by count(*) desc, max(f.finished_at) desc
