-- Housekeeping: every (queue, state) that has terminal jobs, by a loose scan of jobs_finished (one index probe each).
with recursive pairs as (
  (select queue, state from :PGONCE_SCHEMA.jobs
   where :PGONCE_SCHEMA._is_terminal(state) order by queue, state limit 1)
  union all
  select n.queue, n.state from pairs p, lateral (
    select j.queue, j.state from :PGONCE_SCHEMA.jobs j
    where :PGONCE_SCHEMA._is_terminal(j.state) and (j.queue, j.state) > (p.queue, p.state)
    order by j.queue, j.state limit 1) n
)
select queue, state from pairs
