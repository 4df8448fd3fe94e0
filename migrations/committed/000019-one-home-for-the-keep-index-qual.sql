--! Previous: sha1:f2e2bc02cbe8853894e420bcaf315aec83c60e7b
--! Hash: sha1:dc90908ec7279716c9ecb5fd09b4f535dcf080ac
--! Message: one home for the keep-index qual

-- One home for the qual of migration 000018: `_keep_index(id)` is `id > 0 or _prefer_index(id)`, an SQL function the
-- planner inlines, so that each statement gets the same expression (and its cost) that 000018's statements wrote out.
-- The rule it carries (job ids start at 1, so the first operand holds for every row and _prefer_index() is never
-- called) is stated once, here and in docs/architecture.md, instead of in every statement.
create or replace function :PGONCE_SCHEMA._keep_index(p_id bigint) returns boolean
language sql immutable as $$
  select p_id > 0 or :PGONCE_SCHEMA._prefer_index(p_id)
$$;
