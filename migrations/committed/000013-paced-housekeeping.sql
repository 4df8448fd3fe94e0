--! Previous: sha1:c46ffa6d05f8589c5128c79b30f0bb64d39c2383
--! Hash: sha1:a56e69aaa32b182858b9fcdd851c963d59df82fb
--! Message: paced housekeeping

-- Paced housekeeping. A Worker's housekeeping pauses after each full batch for three times as long as the batch took,
-- so that working off a backlog (a retention shortened on a long history) leaves the server to the queue's own work:
-- a 50,000-job drain beside it ran at 0.84x its speed alone, against 0.63x beside back-to-back rounds
-- (bench/README.md, "Pruning beside a drain"). The pause is shared by every runner of the schema: the one pausing
-- writes this row in its batch's transaction, and until paused_until the others' rounds stop at their first batch
-- (as when the housekeeping lock is taken), so that a fleet of workers prunes at one runner's pace.
create table :PGONCE_SCHEMA.housekeeping_pace (
  singleton     boolean primary key default true check (singleton),
  runner        uuid not null,
  paused_until  timestamptz not null
);
comment on table :PGONCE_SCHEMA.housekeeping_pace is
  'The paced housekeeping round (a Worker''s) between two batches: until paused_until, rounds of other runners leave the work to runner.';
