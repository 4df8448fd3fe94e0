-- Inside a housekeeping step's transaction: takes the transaction-level advisory lock of schema $1 that lets one
-- housekeeping runner at a time work (false: another runner is inside a step). Held until that step commits, so it
-- works through a transaction-mode pooler, and a runner that dies lets go with its transaction, at once. Also false
-- while a paced runner other than $2 pauses between two of its batches (housekeeping_pace).
select pg_try_advisory_xact_lock(hashtextextended('pgonce.maintenance:' || $1::text, 0))
  and not exists (select 1 from :PGONCE_SCHEMA.housekeeping_pace p
                  where p.runner <> $2::uuid and p.paused_until > clock_timestamp()) as locked
