// A worker "host" of the namespace tests, run with `ip netns exec` (dev/netns/bed.ts): its only way to PostgreSQL is its
// veth and its latency proxy. It reports on stdout as JSON lines, which need no network: ready, started, aborted, late
// (what its writes got after it lost a lease), acked (the adds it made and saw acknowledged), crash.
//
// Handlers: `{ hold: true }` on a first attempt waits for ctx.signal (the partition test), then tries its late writes;
// otherwise the run records itself and its effect in one ctx.transaction / ctx.effect: `handled` (job, host, attempt)
// and `fx` (one row per effect key). LISTEN_URL (see below) puts the pools behind PgBouncer. ADDS=n adds n jobs from this host (jobIds `<host>-<i>`; for at most
// ADD_SECONDS) before it reports acked.

import pg from 'pg'
import { Queue, Worker } from '../../src/index.js'

const env = (name: string, fallback?: string): string => {
  const value = process.env[name] ?? fallback
  if (value === undefined) throw new Error(`host-worker: ${name} is not set`)
  return value
}
const say = (message: Record<string, unknown>): void => void process.stdout.write(`${JSON.stringify(message)}\n`)
process.on('uncaughtException', (err) => say({ crash: 'uncaughtException', message: err.stack }))
process.on('unhandledRejection', (err) => say({ crash: 'unhandledRejection', message: String(err) }))

const url = env('PGONCE_URL')
const schema = env('PGONCE_SCHEMA')
const host = env('HOST')
const queueName = env('QUEUE')
const fenceMs = Number(env('STATEMENT_TIMEOUT_MS', '5000'))
// LISTEN_URL: the pool goes through PgBouncer in transaction mode (PGONCE_URL), the LISTEN straight to PostgreSQL, and
// no named prepared statements (PgBouncer before 1.21 has none in transaction mode).
const listenUrl = process.env.LISTEN_URL
const connection = {
  connectionString: url,
  schema,
  connectTimeoutMs: fenceMs,
  statementTimeoutMs: fenceMs,
  ...(listenUrl === undefined ? {} : { listenConnectionString: listenUrl, preparedStatements: false }),
}

const worker = new Worker<{ hold?: boolean }>(
  queueName,
  async (job, ctx) => {
    say({ started: job.id, attempt: job.attempts, host })
    if (job.data.hold === true && job.attempts === 1) {
      const reason = await new Promise<unknown>((resolve) =>
        ctx.signal.addEventListener('abort', () => resolve(ctx.signal.reason), { once: true }),
      )
      say({ aborted: job.id, reason: (reason as Error).name, host })
      const late: Record<string, string> = {}
      const attempt = async (what: string, write: () => Promise<unknown>): Promise<void> => {
        late[what] = await write().then(
          (r) => `ok ${JSON.stringify(r)}`,
          (err: Error) => err.name,
        )
      }
      await attempt('effect', () => ctx.effect(`fx:${job.id}`, (tx) => recordEffect(tx, job.id)))
      await attempt('progress', () => ctx.updateProgress({ late: host }))
      await attempt('transaction', () => ctx.transaction((tx) => recordRun(tx, job.id, job.attempts)))
      say({ late: job.id, host, ...late })
      return { host, late: true }
    }
    await ctx.effect(`fx:${job.id}`, (tx) => recordEffect(tx, job.id))
    return ctx.transaction(async (tx) => {
      await recordRun(tx, job.id, job.attempts)
      return { host }
    })
  },
  {
    ...connection,
    concurrency: Number(env('CONCURRENCY', '8')),
    leaseMs: Number(env('LEASE_MS', '30000')),
    pollIntervalMs: Number(env('POLL_MS', '500')),
    maintenanceIntervalMs: Number(env('MAINTENANCE_MS', '1000')),
    closeTimeoutMs: 2_000,
    migrate: false,
  },
)
worker.on('error', (err) => process.stderr.write(`host-worker ${host} error: ${err.message}\n`))

function recordRun(tx: pg.PoolClient, jobId: string, attempt: number): Promise<unknown> {
  return tx.query(`insert into "${schema}".handled (job_id, host, attempt) values ($1, $2, $3)`, [jobId, host, attempt])
}

function recordEffect(tx: pg.PoolClient, jobId: string): Promise<unknown> {
  return tx.query(`insert into "${schema}".fx (job_id, host) values ($1, $2)`, [jobId, host])
}

/**
 * Adds up to `n` jobs one by one, for at most `seconds` (0: no limit); each add is retried on an error until acknowledged:
 * its jobId makes a retry of an add that committed unseen answer with that job.
 */
async function addJobs(n: number, seconds: number): Promise<void> {
  const queue = new Queue(queueName, { ...connection, migrate: false })
  const acked: string[] = []
  const until = seconds > 0 ? Date.now() + seconds * 1000 : Infinity
  for (let i = 0; i < n && Date.now() < until; i++) {
    for (;;) {
      try {
        // Attempts to spare: a run whose statements time out in the loss test fails that attempt (a database fault in
        // the handler), and the job is retried, as a user's would be.
        const job = await queue.add(
          'from-host',
          {},
          { jobId: `${host}-${i}`, attempts: 10, backoff: { type: 'fixed', delay: 100 } },
        )
        acked.push(job.id)
        break
      } catch (err) {
        process.stderr.write(`host-worker ${host} add ${i}: ${(err as Error).message}\n`)
      }
    }
  }
  await queue.close()
  say({ acked, host })
}

let closing = false
process.once('SIGTERM', () => {
  closing = true
  void worker
    .close()
    .then(() => process.exit(0))
    .catch(() => process.exit(1))
})
await worker.run()
say({ ready: host })
const adds = Number(env('ADDS', '0'))
if (adds > 0 && !closing) await addJobs(adds, Number(env('ADD_SECONDS', '0')))
