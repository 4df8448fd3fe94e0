// The lab probes' own database: dropped and created again on the server of `url` (through its `postgres` database), and
// what a probe may change in its schema.

import { createDatabase } from './postgres-server.js'

/** Drops the database `url` names and creates it again (through the server's `postgres` database). */
export async function recreateDatabase(url: URL): Promise<void> {
  await createDatabase(url.href, decodeURIComponent(url.pathname.slice(1)))
}

/** Drops the three foreign keys to `jobs` (dedup_keys, job_dependencies) of `schema`: what their cascades cost. */
export async function dropJobForeignKeys(db: { query: (text: string) => Promise<unknown> }, schema: string): Promise<void> {
  await db.query(`alter table "${schema}".dedup_keys drop constraint dedup_keys_owner`)
  await db.query(`alter table "${schema}".job_dependencies drop constraint job_dependencies_job, drop constraint job_dependencies_parent`)
}
