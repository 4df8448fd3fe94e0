-- Reads why execution key $1 could not be claimed: its state, and whether it is still unexpired (no row: it vanished).
select state, (expires_at is null or expires_at > now()) as held
from :PGONCE_SCHEMA.execution_claims
where key = $1
