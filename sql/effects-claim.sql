-- Claims execution key $1 with token $2 for $3 ms: inserts a running claim or takes over an expired one; no row while it is held.
insert into :PGONCE_SCHEMA.execution_claims as c (key, state, token, expires_at)
values ($1, 'running', $2::uuid, now() + $3::bigint * interval '1 millisecond')
on conflict (key) do update
  set state = 'running', token = excluded.token, expires_at = excluded.expires_at
  where c.expires_at is not null and c.expires_at <= now()
returning c.token
