-- The cache listener's heartbeat (src/cache/listener-lease.ts): a NOTIFY on its own channel $1, payload $2, sent on its
-- own LISTEN session. Hearing it back proves the session has delivered every NOTIFY committed before it was sent.
select pg_notify($1::text, $2::text)
