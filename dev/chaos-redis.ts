// npm run chaos with CHAOS_REDIS=1: the Redis layer under dev/chaos.ts's faults, with keys removed by a process without redis and by SQL, and cache listeners frozen; a re-add right after a removal that is answered by the removed key's owner is a lost job.
//
// Workers and the producers' Queue get `redis` (REDIS_URL, else redis://127.0.0.1:6379). Beside the producers,
// re-adders play the "force a new job" flow over keys of their own: add a key with a TTL, add it again until Redis
// may answer, remove it (by a child process whose Queue has no redis, by `call remove_dedup_key()`, by a bare DELETE
// followed by `select wait_for_caches()`, or by the producers' Queue), then add it again at once: that add must be a
// new job. Faults added: the cache listeners' backends are SIGSTOPped for 50 ms to 3 s (past the lease, sometimes past
// the stall a listener replaces its session after), and terminated with the other backends.

import { type ChildProcess, spawn } from 'node:child_process'
import { randomInt } from 'node:crypto'
import { createInterface } from 'node:readline'
import { Redis } from 'ioredis'
import type pg from 'pg'
import { Queue } from '../src/index.js'

export const CHAOS_REDIS = process.env.CHAOS_REDIS === '1'
export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms))

/** The `pgonce-cache <schema> <pid>` sessions of this run (application_name pattern). */
export const cacheListenerPattern = (schema: string): string => `pgonce-cache ${schema} %`

// ---------------------------------------------------------------------------------------------------------------
// The remover: a process whose Queue has no redis.

/** CHAOS_ROLE=remover: removes the keys named on stdin (one JSON line each), answering `{ tag, removed }` or `{ tag, error }`. */
export async function runRemover(): Promise<void> {
  const queue = new Queue('chaos', {
    connectionString: process.env.CHAOS_URL,
    schema: process.env.CHAOS_SCHEMA,
    migrate: false,
  })
  const lines = createInterface({ input: process.stdin })
  lines.on('line', (line) => {
    const { tag, key } = JSON.parse(line) as { tag: number; key: string }
    queue.removeDeduplicationKey(key).then(
      (removed) => process.stdout.write(`${JSON.stringify({ tag, removed })}\n`),
      (err: Error) => process.stdout.write(`${JSON.stringify({ tag, error: err.message })}\n`),
    )
  })
  lines.on('close', () => void queue.close().then(() => process.exit(0)))
  process.stdout.write('ready\n')
}

/** The remover process, seen from the harness. */
export class Remover {
  private readonly child: ChildProcess
  private readonly waiting = new Map<number, (reply: { removed?: boolean; error?: string }) => void>()
  private tag = 0

  constructor(file: string, env: NodeJS.ProcessEnv) {
    this.child = spawn(process.execPath, ['--conditions=development', '--import', 'tsx', file], {
      env: { ...env, CHAOS_ROLE: 'remover' },
      stdio: ['pipe', 'pipe', 'inherit'],
    })
    createInterface({ input: this.child.stdout! }).on('line', (line) => {
      if (!line.startsWith('{')) return
      const reply = JSON.parse(line) as { tag: number; removed?: boolean; error?: string }
      this.waiting.get(reply.tag)?.(reply)
      this.waiting.delete(reply.tag)
    })
  }

  /** Removes `key` there; rejects with the error it saw (or after 30 s). */
  remove(key: string): Promise<boolean> {
    const tag = ++this.tag
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('the remover did not answer within 30 s')), 30_000)
      this.waiting.set(tag, (reply) => {
        clearTimeout(timer)
        if (reply.error !== undefined) reject(new Error(reply.error))
        else resolve(reply.removed === true)
      })
      this.child.stdin?.write(`${JSON.stringify({ tag, key })}\n`)
    })
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null) return
    const gone = new Promise((r) => this.child.once('exit', r))
    this.child.stdin?.end()
    await Promise.race([gone, sleep(10_000).then(() => this.child.kill('SIGKILL'))])
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Re-adders.

export interface ReAddStats {
  /** Rounds whose removal returned (so the re-add was checked), by how the key was removed. */
  checked: Record<string, number>
  /** Re-adds answered by the removed key's owner: lost jobs. */
  stale: number
  /** Rounds given up on a fault (an add or the removal failed). */
  faulted: number
}

type Ack = { id: string; jobId: string | null; key: string | null }

/**
 * `lanes` re-adders, each over keys of its own, until `running()` is false. Every acknowledged add goes to `acks`.
 */
export async function reAdd(opts: {
  queue: Queue<unknown>
  pool: pg.Pool
  schema: string
  remover: Remover
  lanes: number
  acks: Ack[]
  running: () => boolean
}): Promise<ReAddStats> {
  const stats: ReAddStats = { checked: {}, stale: 0, faulted: 0 }
  const { queue, pool, schema } = opts
  const removals: Record<string, (key: string) => Promise<boolean>> = {
    'process without redis': (key) => opts.remover.remove(key),
    'call remove_dedup_key()': async (key) =>
      (await pool.query<{ removed: boolean }>(`call "${schema}".remove_dedup_key($1, $2)`, ['chaos', key])).rows[0]
        ?.removed === true,
    'DELETE, wait_for_caches()': async (key) => {
      const { rowCount } = await pool.query(`delete from "${schema}".dedup_keys where queue = $1 and key = $2`, [
        'chaos',
        key,
      ])
      await pool.query(`select "${schema}".wait_for_caches()`)
      return rowCount === 1
    },
    'queue with redis': (key) => queue.removeDeduplicationKey(key),
  }
  const methods = Object.keys(removals)
  await Promise.all(
    Array.from({ length: opts.lanes }, async (_, lane) => {
      for (let n = 0; opts.running(); n++) {
        const key = `f${lane}-${n}`
        const add = async (): Promise<string> => {
          const job = await queue.add('c', { r: n }, { deduplication: { id: key, ttl: 60_000 }, attempts: 100 })
          opts.acks.push({ id: job.id, jobId: null, key })
          return job.id
        }
        const method = methods[randomInt(methods.length)] as string
        try {
          const owner = await add()
          // Duplicates: the first is answered by Postgres and writes the entry, the next ones may come from Redis.
          for (let i = 0; i < 3; i++) {
            await add()
            await sleep(2)
          }
          if (!(await (removals[method] as (key: string) => Promise<boolean>)(key))) throw new Error('nothing removed')
          if ((await add()) === owner) stats.stale++
          stats.checked[method] = (stats.checked[method] ?? 0) + 1
        } catch {
          stats.faulted++
          await sleep(20)
        }
        await sleep(randomInt(5, 30))
      }
    }),
  )
  return stats
}

// ---------------------------------------------------------------------------------------------------------------
// Frozen cache listeners.

/** Backends SIGSTOPped and not yet continued (the harness continues them all on its way out). */
export const frozenBackends = new Set<number>()

/** SIGSTOPs the backend of a random cache listener of the run for 50 ms to 3 s; resolves once it is continued. */
export async function freezeCacheListener(pool: pg.Pool, schema: string): Promise<boolean> {
  const { rows } = await pool
    .query<{ pid: number }>(
      'select pid from pg_stat_activity where datname = current_database() and application_name like $1',
      [cacheListenerPattern(schema)],
    )
    .catch(() => ({ rows: [] as { pid: number }[] }))
  const victim = rows[randomInt(Math.max(rows.length, 1))]?.pid
  if (victim === undefined || frozenBackends.has(victim)) return false
  try {
    process.kill(victim, 'SIGSTOP')
  } catch {
    return false
  }
  frozenBackends.add(victim)
  await sleep(randomInt(50, 3_000))
  continueBackend(victim)
  return true
}

export function continueBackend(pid: number): void {
  frozenBackends.delete(pid)
  try {
    process.kill(pid, 'SIGCONT')
  } catch {
    // Gone meanwhile.
  }
}

/** Deletes the run's keys from Redis. */
export async function deleteRedisKeys(schema: string): Promise<void> {
  const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 })
  redis.on('error', () => {})
  try {
    let cursor = '0'
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `pgonce:{${schema}*`, 'COUNT', 1000)
      cursor = next
      if (keys.length > 0) await redis.del(...keys)
    } while (cursor !== '0')
  } finally {
    redis.disconnect()
  }
}
