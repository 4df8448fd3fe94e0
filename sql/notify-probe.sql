-- A NOTIFY that a LISTEN connection (a Worker's notifier, the cache listener) must hear from another connection before
-- it is trusted (src/db/notify-probe.ts): behind a transaction-mode pooler it is not heard. $1: the payload.
select pg_notify(:PGONCE_CHANNEL, $1::text)
