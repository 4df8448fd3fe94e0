// Creates and drops the benchmark's own databases on the server under test.

import pg from 'pg'
import { createDatabase } from '../dev/postgres-server.js'

/**
 * `pgonce_bench_<base>` with this run's process id: two runs on one server (say, two checkouts measuring at once) never
 * drop each other's databases.
 */
export function benchDatabase(base: string): string {
  return `pgonce_bench_${base}_p${process.pid}`
}

/** A fresh (dropped and re-created) database `name`; returns its connection string. */
export function freshDatabase(serverUrl: string, name: string): Promise<string> {
  return createDatabase(serverUrl, name)
}

/** Drops database `name` (connected through the server's maintenance database). */
export async function dropDatabase(serverUrl: string, name: string): Promise<void> {
  const admin = new URL(serverUrl)
  admin.pathname = '/postgres'
  const client = new pg.Client({ connectionString: admin.toString() })
  await client.connect()
  try {
    // A pool's end() resolves once its clients are told to end, before their sockets close (pg-pool): a forced drop in
    // that instant reaches a closing client, whose 'error' event, if its pool has no listener, ends the whole run.
    // Wait (briefly) for the database's sessions to go; force only what is left after that.
    for (let i = 0; i < 100; i++) {
      const { rows } = await client.query<{ n: number }>(
        'select count(*)::int as n from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()',
        [name],
      )
      if (rows[0]?.n === 0) break
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    await client.query(`drop database if exists ${client.escapeIdentifier(name)} with (force)`)
  } finally {
    await client.end()
  }
}
