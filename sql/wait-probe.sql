-- A NOTIFY on the waiters channel that a queue's waiter connection (src/wait-for-job.ts) must hear from another
-- connection before it is trusted: behind a transaction-mode pooler it is not heard, and the waits only poll. $1: the payload.
select pg_notify(:PGONCE_CHANNEL || ':done', $1::text)
