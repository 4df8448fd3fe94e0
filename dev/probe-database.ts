// The lab probes' own database: dropped and created again on the server of `url` (through its `postgres` database).

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
