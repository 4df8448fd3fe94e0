-- Marks key $1 done, only while token $2 still holds its claim; the marker expires after $3 ms (null: never).
update :PGONCE_SCHEMA.execution_claims
set state = 'done',
    token = null,
    expires_at = case when $3::bigint is null then null else now() + $3::bigint * interval '1 millisecond' end
where key = $1 and token = $2::uuid and state = 'running'
returning 1 as completed
