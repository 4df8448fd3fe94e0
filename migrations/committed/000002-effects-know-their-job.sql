--! Previous: sha1:9480f0f1c26de0d85aed49b1a22f6cff25f607d6
--! Hash: sha1:d8fe85eaee90b259962f17c16d7cbaa9c21be335
--! Message: effects-know-their-job

-- A ledger row names the job whose ctx.effect recorded it (null: recorded by effects.record() outside a job, or
-- before this column existed), so that a job's page (the dashboard, SQL) lists its effects. No foreign key: the
-- ledger outlives the jobs retention deletes, and an effect stays recorded after its job is gone.
alter table :PGONCE_SCHEMA.processed_effects add column job_id bigint;
create index processed_effects_job on :PGONCE_SCHEMA.processed_effects (job_id) where job_id is not null;
comment on column :PGONCE_SCHEMA.processed_effects.job_id is
  'The job whose ctx.effect recorded the row; null: recorded outside a job (effects.record()).';
