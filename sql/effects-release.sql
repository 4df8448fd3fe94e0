-- Releases the running claim on key $1 after its work failed, only while token $2 still holds it.
delete from :PGONCE_SCHEMA.execution_claims
where key = $1 and token = $2::uuid and state = 'running'
returning 1 as released
