-- Releases the housekeeping advisory lock of schema $1 taken by try-maintenance-lock.sql.
select pg_advisory_unlock(hashtextextended('pgonce.maintenance:' || $1::text, 0)) as unlocked
