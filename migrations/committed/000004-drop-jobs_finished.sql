--! Previous: sha1:de36b56fbead431505040b8d5b04c603ba27bd4a
--! Hash: sha1:518e960294f28836812e7a8d72aa8358dfaa3908
--! Message: drop jobs_finished

-- Drop the jobs_finished index: no query reads it, and it cost one index write
-- per completed or failed job (retention, when it comes, brings the index it
-- needs).

drop index :PGONCE_SCHEMA.jobs_finished;
