-- The flow-control limits of queues $1 that have any (the queue_limits view): the limits, the slots in use, the starts
-- in the rate window, a ctx.rateLimit hold still
-- running (database clock). A queue without limits has no row.
select l.queue, l.concurrency, l.rate_max, l.rate_duration_ms, l.slots_in_use, l.rate_used,
       case when l.rate_paused_until > now() then l.rate_paused_until end as held_until
from :PGONCE_SCHEMA.queue_limits l
where l.queue = any($1::text[])
