-- Jobs of queue $1 completed and failed in each of the last 60 minutes (minute 0: the one ending now, by the database
-- clock), each minute read newest first from jobs_finished (queue, state, finished_at) and at most $2 entries of it:
-- jobs counts them, span_ms is how far back from the minute's end the jobs read go. A minute with $2 or more is
-- estimated from that rate by the caller, so the cost is at most 120 x $2 index entries however busy the hour was.
select m.minutes_ago, s.state, c.jobs, c.span_ms
from generate_series(0, 59) as m(minutes_ago)
cross join (values ('completed'), ('failed')) as s(state)
cross join lateral (
  select count(*)::integer as jobs,
         (extract(epoch from (now() - make_interval(mins => m.minutes_ago) - min(x.finished_at))) * 1000)::float8 as span_ms
  from (
    select j.finished_at
    from :PGONCE_SCHEMA.jobs j
    where j.queue = $1 and j.state = s.state and :PGONCE_SCHEMA._is_terminal(j.state)
      and j.finished_at > now() - make_interval(mins => m.minutes_ago + 1)
      and j.finished_at <= now() - make_interval(mins => m.minutes_ago)
    order by j.finished_at desc
    limit $2
  ) x
) c
where c.jobs > 0
