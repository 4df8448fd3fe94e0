// The server's physical limits on this run: pgbench INSERT rates on a scratch table in a scratch database.

import { execFile } from 'node:child_process'
import { existsSync, readFileSync, readdirSync } from 'node:fs'
import { isAbsolute } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import pg from 'pg'
import { dropDatabase, freshDatabase } from './databases.js'

const run = promisify(execFile)
/** bench/pgbench/<name>.sql, or `name` itself when it is an absolute path (a script written at run time). */
const script = (name: string): string =>
  isAbsolute(name) ? name : fileURLToPath(new URL(`./pgbench/${name}.sql`, import.meta.url))

export interface ServerLimits {
  /** Single-row INSERT transactions/s, 1 client. */
  singleInsert1: number
  /** Single-row INSERT transactions/s, 16 clients. */
  singleInsert16: number
  /** Single-row INSERT + pg_notify transactions/s, 16 clients. */
  singleInsertNotify16: number
  /** Rows/s of 1,000-row INSERTs, 1 client. */
  multiInsertRows1: number
  seconds: number
}

/** pgbench on PATH, else from a Debian-style PostgreSQL install; null when there is none. */
export function findPgbench(): string | null {
  for (const dir of (process.env.PATH ?? '').split(':')) {
    if (dir && existsSync(`${dir}/pgbench`)) return `${dir}/pgbench`
  }
  const root = '/usr/lib/postgresql'
  if (!existsSync(root)) return null
  const versions = readdirSync(root).sort((a, b) => Number(b) - Number(a))
  for (const version of versions) {
    if (existsSync(`${root}/${version}/bin/pgbench`)) return `${root}/${version}/bin/pgbench`
  }
  return null
}

/** Transactions/s of `bench/pgbench/<name>.sql` run by `clients` clients for `seconds`. */
export async function tps(pgbench: string, url: string, name: string, clients: number, seconds: number, prepared = false): Promise<number> {
  const args = ['-n', '-f', script(name), '-c', String(clients), '-j', String(Math.min(clients, 2)), '-T', String(seconds),
    ...(prepared ? ['-M', 'prepared'] : []), url]
  const { stdout } = await run(pgbench, args, { maxBuffer: 1 << 20 })
  const match = /tps = ([\d.]+) \(without initial connection time\)/.exec(stdout)
  if (!match) throw new Error(`pgbench ${name}: no tps in its output:\n${stdout}`)
  return Number(match[1])
}

/** Runs the four measurements in database `pgonce_bench_scratch`; `skipped` says why when pgbench is missing. */
export async function measureServerLimits(serverUrl: string, seconds: number): Promise<ServerLimits | { skipped: string }> {
  const pgbench = findPgbench()
  if (!pgbench) return { skipped: 'pgbench not found (install postgresql-client to measure the server limit)' }
  const url = await freshDatabase(serverUrl, 'pgonce_bench_scratch')
  const reset = async (): Promise<void> => {
    const client = new pg.Client({ connectionString: url })
    await client.connect()
    try {
      await client.query(readFileSync(script('setup'), 'utf8'))
      await client.query('checkpoint').catch(() => {})
    } finally {
      await client.end()
    }
  }
  try {
    await reset()
    const singleInsert1 = await tps(pgbench, url, 'single-insert', 1, seconds)
    await reset()
    const singleInsert16 = await tps(pgbench, url, 'single-insert', 16, seconds)
    await reset()
    const singleInsertNotify16 = await tps(pgbench, url, 'single-insert-notify', 16, seconds)
    await reset()
    const multiInsertRows1 = (await tps(pgbench, url, 'multi-insert', 1, seconds)) * 1000
    return { singleInsert1, singleInsert16, singleInsertNotify16, multiInsertRows1, seconds }
  } finally {
    await dropDatabase(serverUrl, 'pgonce_bench_scratch')
  }
}
