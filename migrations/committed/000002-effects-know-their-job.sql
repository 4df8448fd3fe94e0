--! Previous: sha1:547927876b4f15da8377ddce619d149f16a53fea
--! Hash: sha1:c7225af73f7fae5965f6d9d512f9760e71bd9ace
--! Message: effects-know-their-job

-- A ledger row names the job whose ctx.effect recorded it (null: recorded by effects.record() outside a job, or
-- before this column existed), so that a job's page (the dashboard, SQL) lists its effects. No foreign key: the
-- ledger outlives the jobs retention deletes, and an effect stays recorded after its job is gone.
alter table :PGONCE_SCHEMA.processed_effects add column job_id bigint;
create index processed_effects_job on :PGONCE_SCHEMA.processed_effects (job_id) where job_id is not null;
comment on column :PGONCE_SCHEMA.processed_effects.job_id is
  'The job whose ctx.effect recorded the row; null: recorded outside a job (effects.record()).';
