// `npm run bench`: issue 6's workloads on pgonce and its peers, each in a fresh database of one server; prints the table, writes bench/results/<date>-<host>[-n].json.

import { mkdirSync, writeFileSync } from 'node:fs'
import pg from 'pg'
import { startPostgres } from '../dev/postgres-server.js'
import { type RunSettings, settingsFromEnv } from './config.js'
import { dropDatabase, freshDatabase } from './databases.js'
import { describeMachine, redisVersion } from './machine.js'
import { runProducers } from './measure.js'
import { measureServerLimits } from './pgbench.js'
import { renderMarkdown } from './report.js'
import { countRoundTrips } from './round-trips.js'
import type { BenchRun, SystemRun } from './run-result.js'
import { SYSTEMS } from './systems/registry.js'
import type { SystemInfo } from './systems/system.js'
import { bulkAdds, concurrentAdds, sequentialAdds } from './workloads/add-throughput.js'
import { type WorkloadContext, type WorkloadId, type WorkloadResult, payloads } from './workloads/context.js'
import { dedupAdds, duplicateAddLatency } from './workloads/dedup.js'
import { deepBacklog, drainBacklog } from './workloads/drain.js'
import { pickupLatency } from './workloads/pickup-latency.js'

const WORKLOADS: [WorkloadId, (ctx: WorkloadContext) => Promise<WorkloadResult>][] = [
  ['W1', sequentialAdds],
  ['W2', concurrentAdds],
  ['W3', bulkAdds],
  ['W4', drainBacklog],
  ['W5', dedupAdds],
  ['W6', pickupLatency],
  ['W7', duplicateAddLatency],
  ['W8', deepBacklog],
]

const log = (message: string): void => {
  process.stderr.write(`[bench] ${message}\n`)
}

function summary(r: WorkloadResult): string {
  const figures = r.perSecond !== undefined ? `${Math.round(r.perSecond)}/s` : `p50 ${r.p50Ms?.toFixed(2)} ms, p99 ${r.p99Ms?.toFixed(2)} ms`
  return `${figures}${r.correct ? '' : ` WRONG: ${r.note}`}`
}

/** The Redis URL with a key prefix of this run's own, so that it never touches anyone else's keys. */
function redisTarget(redisUrl: string): string {
  const url = new URL(redisUrl)
  url.searchParams.set('prefix', `pgonce-bench-${process.pid}-${Date.now().toString(36)}`)
  return url.toString()
}

/** A few untimed adds, so that connections, prepared statements and the JIT are warm before W1. */
async function warmUp(ctx: WorkloadContext): Promise<void> {
  await ctx.system.prepare('warmup')
  await runProducers(20 * ctx.sizes.producers, ctx.sizes.producers, (i) => ctx.system.add('warmup', { i }))
  for (let b = 0; b < 2; b++) await ctx.system.addBulk('warmup', payloads(b * 1000, 1000))
}

/**
 * W4 and W8 time the backlog of one queue: each runs in a database (or under a Redis prefix) of its own, so that the
 * jobs earlier workloads left waiting in other queues (65,000 from W1–W3, never consumed) do not weigh on it.
 * They did on graphile-worker, whose fetch skips waiting jobs of tasks the worker does not handle: with W3's 50,000
 * left in its table its W8 fell from ~55,000 to ~35,000 jobs/s, in a full run to ~27,000.
 */
const OWN_DATABASE = new Set<WorkloadId>(['W4', 'W8'])

/** Opens `info` in a fresh database `database` (or a fresh Redis prefix), runs `fn`, closes it and drops the database. */
async function inFreshDatabase<T>(info: SystemInfo, serverUrl: string, settings: RunSettings, database: string,
  fn: (ctx: WorkloadContext) => Promise<T>): Promise<T> {
  const url = info.backend === 'postgres' ? await freshDatabase(serverUrl, database) : redisTarget(settings.redisUrl)
  const admin = info.backend === 'postgres' ? new pg.Pool({ connectionString: url, max: 1 }) : null
  // Ended before the forced drop of the database, which can still reach its closing client (see systems/pgonce.ts).
  admin?.on('error', () => {})
  try {
    const system = await info.open(url)
    try {
      return await fn({ info, system, url, sizes: settings.sizes, admin, roundTrips: countRoundTrips() })
    } finally {
      await system.close()
    }
  } finally {
    await admin?.end()
    if (info.backend === 'postgres') await dropDatabase(serverUrl, database)
  }
}

async function benchSystem(info: SystemInfo, serverUrl: string, settings: RunSettings): Promise<SystemRun> {
  const run: SystemRun = { id: info.id, label: info.label, backend: info.backend, config: info.config, workloads: {}, errors: {} }
  const database = `pgonce_bench_${info.id.replace(/-/g, '_')}`
  try {
    await inFreshDatabase(info, serverUrl, settings, database, async (ctx) => {
      const { admin } = ctx
      // Every system starts from the same server state: the previous system's (or pgbench's) dirty pages written out,
      // not flushed in the background during this one's first workloads. Needs superuser (or pg_checkpoint); skipped if refused.
      if (admin) await admin.query('checkpoint').catch((err: Error) => log(`checkpoint skipped: ${err.message}`))
      await warmUp(ctx)
      for (const [id, workload] of WORKLOADS) {
        if (id === 'W8' && settings.sizes.w8Queued === 0) continue
        if (settings.workloads && !settings.workloads.includes(id)) continue
        const started = performance.now()
        try {
          const result = OWN_DATABASE.has(id)
            ? await inFreshDatabase(info, serverUrl, settings, `${database}_${id.toLowerCase()}`, workload)
            : await workload(ctx)
          run.workloads[id] = result
          log(`${info.label} ${id}: ${summary(result)} (${((performance.now() - started) / 1000).toFixed(1)} s)`)
        } catch (err) {
          run.errors[id] = err instanceof Error ? err.stack ?? err.message : String(err)
          log(`${info.label} ${id} failed: ${run.errors[id]}`)
        }
      }
    })
  } catch (err) {
    run.errors.open = err instanceof Error ? err.stack ?? err.message : String(err)
    log(`${info.label} failed: ${run.errors.open}`)
  }
  return run
}

function notes(settings: RunSettings, redis: string | null): string[] {
  const s = settings.sizes
  return [
    ...(settings.note ? [settings.note] : []),
    'Each system runs alone, in a fresh database of the same server, after a CHECKPOINT and a short untimed warm-up; workloads run one after another in table order, W4 and W8 each in a fresh database of their own (without the jobs W1–W3 left waiting in other queues).',
    'W4 and W8 run the consumer in a child process (also the source of the RSS figures). W4 is timed from the first handler start until the system reports every job completed; ' +
      `W8 from the first handler start to the ${s.w8Window.toLocaleString('en-US')}th, with the backlog vacuumed and analysed first.`,
    'W6 sends one job at a time (producer and worker in one process, 10 ms apart) and times add() call → handler start.',
    `W6 and W7 time their samples after ${s.warmup} untimed ones of the same kind.`,
    'W5 and W7 use each system\'s own dedup feature (configuration below); a wrong job count is marked ✗.',
    redis
      ? 'BullMQ on Redis is a reference, not a Postgres peer: it is left out of the ratio column.'
      : `Redis did not answer at ${settings.redisUrl}: the BullMQ on Redis reference column was skipped.`,
    ...(s.w8Queued === 0 ? ['W8 skipped (BENCH_W8_SCALE=0).'] : []),
  ]
}

const settings = settingsFromEnv()
const startedAt = new Date()
const server = await startPostgres(log)
try {
  const redis = await redisVersion(settings.redisUrl)
  const machine = await describeMachine(server.url, server.kind, redis)
  log(`sizes ${JSON.stringify(settings.sizes)}`)
  const limits = settings.pgbenchSeconds > 0
    ? await measureServerLimits(server.url, settings.pgbenchSeconds)
    : { skipped: 'not measured (BENCH_PGBENCH_SECONDS=0)' }
  log(`server limits ${JSON.stringify(limits)}`)
  const chosen = SYSTEMS.filter((s) => (settings.systems ? settings.systems.includes(s.id) : true))
    .filter((s) => s.backend === 'postgres' || redis !== null)
  const systems: SystemRun[] = []
  for (const info of chosen) systems.push(await benchSystem(info, server.url, settings))
  const run: BenchRun = {
    startedAt: startedAt.toISOString(),
    seconds: (Date.now() - startedAt.getTime()) / 1000,
    machine,
    scale: settings.scale,
    sizes: settings.sizes,
    limits,
    systems,
    notes: notes(settings, redis),
  }
  process.stdout.write(`${renderMarkdown(run)}\n`)
  const dir = new URL('./results/', import.meta.url)
  mkdirSync(dir, { recursive: true })
  // A scaled or partial run never overwrites the figures of a full one, and a full run never overwrites an earlier
  // one of the same day (it takes the next free -2, -3, …); a partial run replaces the previous partial one.
  const partial = Boolean(settings.systems || settings.workloads)
  const tag = `${settings.scale === 1 ? '' : `-scale${settings.scale}`}${partial ? '-partial' : ''}`
  const stem = `${startedAt.toISOString().slice(0, 10)}-${machine.host.replace(/[^A-Za-z0-9_.-]/g, '_')}${tag}`
  const text = `${JSON.stringify(run, null, 2)}\n`
  for (let n = 1; ; n++) {
    const file = new URL(`${stem}${n === 1 ? '' : `-${n}`}.json`, dir)
    try {
      writeFileSync(file, text, { flag: partial ? 'w' : 'wx' })
      log(`wrote ${file.pathname}`)
      break
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
    }
  }
} finally {
  await server.stop()
}
