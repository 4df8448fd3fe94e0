-- Takes the session-level advisory lock that lets one housekeeping runner at a time work on schema $1 (false: another runs).
select pg_try_advisory_lock(hashtextextended('pgonce.maintenance:' || $1::text, 0)) as locked
