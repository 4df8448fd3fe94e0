-- A cache listener's lease (src/cache/listener-lease.ts): listener $1 may answer from Redis for $2 ms from now, and no
-- longer unless it writes this again. Rows whose lease has ended go.
with ended as (
  delete from :PGONCE_SCHEMA.cache_listeners where trusted_until < now() and listener <> $1::text
)
insert into :PGONCE_SCHEMA.cache_listeners as l (listener, trusted_until)
values ($1::text, now() + make_interval(secs => $2::integer / 1000.0))
on conflict (listener) do update set trusted_until = excluded.trusted_until
