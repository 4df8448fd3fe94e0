-- Extends by $3 ms the leases of active jobs ($1 ids, $2 lock tokens) still held with those tokens; returns their tokens (a missing one: lease lost).
-- $4 is always 'active': a parameter, so that a generic plan cannot drive the update from the jobs_leases partial
-- index (estimated at one row, it made a nested loop over every active lease for each input row).
update :PGONCE_SCHEMA.jobs j
set locked_until = now() + make_interval(secs => $3::bigint / 1000.0)
from unnest($1::bigint[], $2::uuid[]) as i(id, token)
where j.id = i.id and j.state = $4::text and j.lock_token = i.token
returning j.lock_token as token
