// The lab probes' own database: dropped and created again on the server of `url` (through its `postgres` database), and
// what a probe may change in its schema.

import pg from 'pg'

export async function recreateDatabase(url: URL): Promise<void> {
  const database = url.pathname.slice(1)
  const adminUrl = new URL(url)
  adminUrl.pathname = '/postgres'
  const admin = new pg.Client({ connectionString: adminUrl.href })
  await admin.connect()
  try {
    await admin.query(`drop database if exists "${database}"`)
    await admin.query(`create database "${database}"`)
  } finally {
    await admin.end()
  }
}

/** Drops the three foreign keys to `jobs` (dedup_keys, job_dependencies) of `schema`: what their cascades cost. */
export async function dropJobForeignKeys(db: { query: (text: string) => Promise<unknown> }, schema: string): Promise<void> {
  await db.query(`alter table "${schema}".dedup_keys drop constraint dedup_keys_owner`)
  await db.query(`alter table "${schema}".job_dependencies drop constraint job_dependencies_job, drop constraint job_dependencies_parent`)
}
