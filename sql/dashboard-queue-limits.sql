-- The flow-control limits of queues $1 that have any (the queue_limits view): the limits, the slots in use, the starts
-- in the rate window, a ctx.rateLimit hold still running (database clock), and the group limits with the group slots
-- in use (all groups together). A queue without limits has no row.
select l.queue, l.concurrency, l.rate_max, l.rate_duration_ms, l.slots_in_use, l.rate_used,
       case when l.rate_paused_until > now() then l.rate_paused_until end as held_until,
       l.group_concurrency, l.group_rate_max, l.group_rate_duration_ms, l.group_slots_in_use
from :PGONCE_SCHEMA.queue_limits l
where l.queue = any($1::text[])
