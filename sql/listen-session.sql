-- Settings of a dedicated LISTEN session (a Worker's notifier, the Redis layer's epoch listener): its name ($1, or the
-- one it has when null: a connection string's own application_name would otherwise win over the config), and TCP
-- keepalives on the server's side of its socket, at most $2 idle seconds, $3 seconds between probes, $4 probes and
-- $5 ms of unacknowledged data (a shorter server setting is kept; 0 means the kernel's default), so that the server
-- ends the session of a peer that vanished without closing it (a host powered off, a network partition) within about
-- half a minute, not the kernel's default two hours. Until then the session's advisory locks live on: a worker's idle
-- slot, one of the queue's four (test/fault/partitioned-listener.test.ts; the epoch listener's timers:
-- test/mechanisms/redis.listen-keepalive.test.ts). Over a Unix socket the keepalive settings do nothing.
select set_config('application_name', coalesce($1, current_setting('application_name')), false),
  set_config('tcp_keepalives_idle', least(nullif(current_setting('tcp_keepalives_idle')::integer, 0), $2::integer)::text, false),
  set_config('tcp_keepalives_interval', least(nullif(current_setting('tcp_keepalives_interval')::integer, 0), $3::integer)::text, false),
  set_config('tcp_keepalives_count', least(nullif(current_setting('tcp_keepalives_count')::integer, 0), $4::integer)::text, false),
  set_config('tcp_user_timeout', least(nullif(current_setting('tcp_user_timeout')::integer, 0), $5::integer)::text, false)
