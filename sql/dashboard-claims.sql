-- runOnce claims by key, at most $3: the key $1 exactly, or the keys starting with $2 (null: any). Primary key.
select c.key, c.state, c.expires_at,
       c.expires_at is not null and c.expires_at <= now() as expired
from :PGONCE_SCHEMA.execution_claims c
where ($1::text is null or c.key = $1)
  and ($2::text is null or (c.key >= $2 and starts_with(c.key, $2)))
order by c.key
limit $3
