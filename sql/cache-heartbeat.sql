-- The cache listener's heartbeat (src/cache/listener-lease.ts): a NOTIFY on the listener's own channel $1, payload
-- $2, sent from pgonce's pool. PostgreSQL delivers NOTIFYs in commit order: once the listener's session hears it, it has
-- heard every NOTIFY committed before this was sent. Its commit does not wait for the WAL flush (nothing in it needs to
-- survive a crash; a NOTIFY is delivered once committed, flushed or not): 40 a second per busy process cost no fsync.
select set_config('synchronous_commit', 'off', true), pg_notify($1::text, $2::text)
