// Shared set-up of the namespace tests: whether they can run here, a bed with a migrated schema and the tables the host
// workers write (handled, fx), host processes, and the checks every test ends with.

import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import pg from 'pg'
import { expect } from 'vitest'
import { Bed, type BedHost, bedUnavailable } from '../../dev/netns/bed.js'
import { migrate } from '../../src/index.js'
import { type Child, alive, captured, exited, notSurviving, repoRoot } from '../helpers/processes.js'
import { waitFor } from '../helpers/wait.js'

/** Why the namespace tests cannot run: only "not root" skips them (CI runs as root); anything else fails them. */
export const skipReason: string | null =
  process.getuid?.() === 0 ? null : (bedUnavailable() ?? 'network namespaces need root')

export function describeTitle(title: string): string {
  return skipReason === null ? title : `${title} (skipped: ${skipReason})`
}

/** The application_name of the test's own pool (Fleet.pool). */
const TEST_POOL_NAME = 'netns-test'

export interface Fleet {
  bed: Bed
  schema: string
  /** The test's own pool, straight to the bed's PostgreSQL (no proxy). */
  pool: pg.Pool
  queue: string
  /** Starts the host worker of `host`, and waits until it is ready. */
  start(host: BedHost, env?: Record<string, string>): Promise<Child>
  /** The processes started, for the checks and the clean-up. */
  children: Child[]
  /** SIGTERM to every host still running, and waits for it to exit (code 0 expected). */
  stopAll(): Promise<(number | string | null)[]>
  close(): Promise<void>
}

/** A bed of `hosts` namespaces, its PostgreSQL migrated into a fresh schema with the host workers' tables. */
export async function fleet(hosts: number, label: string): Promise<Fleet> {
  const bed = await Bed.create({ hosts })
  const children: Child[] = []
  const schema = `${label}_${randomBytes(3).toString('hex')}`
  // Named, so that sampleConnections() leaves its sessions out by name (a count of the pool's clients races its
  // connects and idle closes).
  const pool = new pg.Pool({ connectionString: bed.url, max: 4, application_name: TEST_POOL_NAME })
  // A restart of the bed's server ends the idle connections too: the next query opens a new one.
  pool.on('error', () => {})
  try {
    await migrate({ connectionString: bed.url, schema })
    await pool.query(
      `create table "${schema}".handled (job_id bigint not null, host text not null, attempt int not null);
       create table "${schema}".fx (job_id bigint not null, host text not null)`,
    )
  } catch (err) {
    await pool.end()
    await bed.destroy()
    throw err
  }
  const queue = 'fleet'
  const stopAll = async (): Promise<(number | string | null)[]> =>
    Promise.all(
      children.map((c) => {
        if (alive(c)) c.kill('SIGTERM')
        return exited(c)
      }),
    )
  return {
    bed,
    schema,
    pool,
    queue,
    children,
    async start(host, env = {}) {
      const child = captured(
        bed.spawn(host, [process.execPath, '--import', 'tsx', join(repoRoot, 'test', 'netns', 'host-worker.ts')], {
          PGONCE_URL: host.url,
          PGONCE_SCHEMA: schema,
          HOST: host.name,
          QUEUE: queue,
          ...env,
        }),
      )
      children.push(child)
      await waitFor(
        () => {
          const why = notSurviving(child)
          if (why !== null) throw new Error(`host ${host.name}: ${why}`)
          return child.messages().some((m) => m.ready === host.name)
        },
        60_000,
        `host ${host.name} to start its worker`,
      )
      return child
    },
    stopAll,
    async close() {
      for (const c of children) if (alive(c)) c.kill('SIGKILL')
      await pool.end().catch(() => {})
      await bed.destroy()
    },
  }
}

/**
 * Waits until no job of the fleet's schema is left unfinished. A job that failed for good ends the wait at once, and a
 * timeout names what was left: the error says which jobs and why, not only that the wait ran out.
 */
export async function waitAllCompleted(f: Fleet, timeoutMs = 60_000): Promise<void> {
  const unfinished = async () =>
    (
      await f.pool.query<{ id: string; state: string; attempts: number; run_at: string; locked_by: string | null }>(
        `select id::text, state, attempts, run_at::text, locked_by, last_error
           from "${f.schema}".jobs where state <> 'completed' order by id limit 5`,
      )
    ).rows
  try {
    await waitFor(
      async () => {
        const left = await unfinished()
        const failed = left.filter((j) => j.state === 'failed' || j.state === 'cancelled')
        if (failed.length > 0) throw new Error(`jobs ended without completing: ${JSON.stringify(failed)}`)
        return left.length === 0
      },
      timeoutMs,
      'every job to complete',
    )
  } catch (err) {
    const left = await unfinished().catch(() => [])
    throw new Error(`${(err as Error).message}; unfinished (first 5): ${JSON.stringify(left)}`, { cause: err })
  }
}

/**
 * Samples the client connections of the bed's server (less the test's own pool) until the returned function is called,
 * which resolves with the largest count seen: LISTEN sessions and the rest.
 */
export function sampleConnections(f: Fleet): () => Promise<{ listeners: number; others: number }> {
  let peak = { listeners: 0, others: 0 }
  let sampling = true
  const done = (async () => {
    while (sampling) {
      const { rows } = await f.pool.query<{ listeners: number; others: number }>(
        `select count(*) filter (where application_name like 'pgonce-listener %')::int as listeners,
                count(*) filter (where application_name not like 'pgonce-listener %')::int as others
           from pg_stat_activity where backend_type = 'client backend' and application_name <> $1`,
        [TEST_POOL_NAME],
      )
      if (rows[0]!.listeners + rows[0]!.others > peak.listeners + peak.others) peak = rows[0]!
      await new Promise((r) => setTimeout(r, 100))
    }
  })()
  return async () => {
    sampling = false
    await done
    return peak
  }
}

/** Job ids with how many committed runs (`handled` rows) and effect rows each has. */
export async function runsPerJob(f: Fleet): Promise<{ job_id: string; runs: number; effects: number }[]> {
  const { rows } = await f.pool.query<{ job_id: string; runs: number; effects: number }>(
    `select j.id::text as job_id,
            (select count(*)::int from "${f.schema}".handled h where h.job_id = j.id) as runs,
            (select count(*)::int from "${f.schema}".fx where fx.job_id = j.id) as effects
       from "${f.schema}".jobs j`,
  )
  return rows
}

/** No host crashed (no exit of its own, no uncaught error reported). */
export function expectNoCrash(f: Fleet): void {
  for (const c of f.children) {
    expect(c.messages().filter((m) => 'crash' in m)).toEqual([])
    if (alive(c)) expect(notSurviving(c)).toBeNull()
  }
}

/** Every job in `ids` completed, each with exactly one committed run and one effect. */
export async function expectEachCompletedOnce(f: Fleet, ids: string[]): Promise<void> {
  const per = new Map((await runsPerJob(f)).map((r) => [r.job_id, r]))
  const states = await f.pool.query<{ id: string; state: string }>(
    `select id::text, state from "${f.schema}".jobs where id = any($1::bigint[])`,
    [ids],
  )
  expect(states.rows.filter((r) => r.state !== 'completed')).toEqual([])
  expect(states.rowCount).toBe(new Set(ids).size)
  const wrong = [...new Set(ids)].filter((id) => per.get(id)?.runs !== 1 || per.get(id)?.effects !== 1)
  expect(wrong.map((id) => per.get(id))).toEqual([])
}
