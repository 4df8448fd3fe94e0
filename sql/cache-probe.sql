-- A NOTIFY the cache listener must hear from another connection before it trusts its LISTEN (src/cache/epoch-listener.ts):
-- behind a transaction-mode pooler it does not, and the layer then stays off Redis. $1: the payload.
select pg_notify(:PGONCE_CHANNEL, $1::text)
