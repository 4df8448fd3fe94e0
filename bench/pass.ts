// One pass of the benchmark: a system in one configuration and one maintenance mode, in a fresh database of the
// server, its workloads run one after another in table order. Shared by `npm run bench` (run.ts) and the paired
// comparison with a baseline checkout (pairs.ts).

import pg from 'pg'
import type { RunSettings } from './config.js'
import { dropDatabase, freshDatabase } from './databases.js'
import { errorText, runProducers } from './measure.js'
import { countRoundTrips } from './round-trips.js'
import { type SystemConfig, type SystemInfo, WORKLOAD_IDS } from './systems/system.js'
import { bulkAdds, concurrentAdds, sequentialAdds } from './workloads/add-throughput.js'
import { MODE_LABEL, type Mode, type WorkloadContext, type WorkloadId, type WorkloadResult, maintain, payloads } from './workloads/context.js'
import { dedupAdds, duplicateAddLatency } from './workloads/dedup.js'
import { deepBacklog, drainBacklog } from './workloads/drain.js'
import { pickupLatency } from './workloads/pickup-latency.js'

const WORKLOADS: Record<WorkloadId, (ctx: WorkloadContext) => Promise<WorkloadResult>> = {
  W1: sequentialAdds,
  W2: concurrentAdds,
  W3: bulkAdds,
  W4: drainBacklog,
  W5: dedupAdds,
  W6: pickupLatency,
  W7: duplicateAddLatency,
  W8: deepBacklog,
}

export const log = (message: string): void => {
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

/** A few untimed adds, so that connections, prepared statements and the JIT are warm before the first workload. */
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

/** One pass: a configuration in a mode, over its workloads, from a fresh database. */
export interface PassRun {
  config: string
  mode: Mode
  workloads: Partial<Record<WorkloadId, WorkloadResult>>
  /** Why a workload (or opening the system) failed. */
  errors: Partial<Record<WorkloadId | 'open', string>>
}

export interface PassSpec {
  info: SystemInfo
  config: string
  mode: Mode
}

/** Opens `spec`'s system in a fresh database `database` (or a fresh Redis prefix), runs `fn`, closes it and drops the database. */
async function inFreshDatabase<T>(spec: PassSpec, serverUrl: string, settings: RunSettings, database: string,
  fn: (ctx: WorkloadContext) => Promise<T>): Promise<T> {
  const { info, config, mode } = spec
  const url = info.backend === 'postgres' ? await freshDatabase(serverUrl, database) : redisTarget(settings.redisUrl)
  const admin = info.backend === 'postgres' ? new pg.Pool({ connectionString: url, max: 1 }) : null
  // Ended before the forced drop of the database, which can still reach its closing client (see systems/pgonce.ts).
  admin?.on('error', () => {})
  try {
    const system = await info.open(url, config)
    try {
      return await fn({
        info, config, system, url, sizes: settings.sizes, admin, roundTrips: countRoundTrips(), mode,
        beforeTimed: () => maintain(admin, mode),
      })
    } finally {
      await system.close()
    }
  } finally {
    await admin?.end()
    if (info.backend === 'postgres') await dropDatabase(serverUrl, database)
  }
}

/**
 * W4 or W8 alone, as a pass runs it (its own fresh database, after a CHECKPOINT), without the pass's other workloads:
 * one side of a drain paired in rounds (bench/paired-drains.ts). Throws when it fails or its outcome is wrong.
 */
export async function runDrainAlone(spec: PassSpec, id: 'W4' | 'W8', serverUrl: string, settings: RunSettings): Promise<WorkloadResult> {
  const database = `pgonce_bench_${spec.info.id.replace(/-/g, '_')}_${id.toLowerCase()}`
  const result = await inFreshDatabase(spec, serverUrl, settings, database, async (ctx) => {
    if (ctx.admin) await ctx.admin.query('checkpoint').catch(() => {})
    return WORKLOADS[id](ctx)
  })
  if (!result.correct) throw new Error(`${spec.info.label} ${id}: ${result.note ?? 'wrong outcome'}`)
  return result
}

/** The workloads `config` competes in, of those this run selected. */
export function workloadsOf(config: SystemConfig, settings: RunSettings): WorkloadId[] {
  return WORKLOAD_IDS.filter((id) => (config.workloads ?? WORKLOAD_IDS).includes(id))
    .filter((id) => !settings.workloads || settings.workloads.includes(id))
    .filter((id) => id !== 'W8' || settings.sizes.w8Queued > 0)
}

/** One pass: fresh database, CHECKPOINT, warm-up, then `workloads` in table order (W4 and W8 in databases of their own). */
export async function runPass(spec: PassSpec, workloads: WorkloadId[], serverUrl: string, settings: RunSettings, letter: string): Promise<PassRun> {
  const pass: PassRun = { config: spec.config, mode: spec.mode, workloads: {}, errors: {} }
  const name = `${spec.info.label} [${letter}] ${MODE_LABEL[spec.mode]}`
  const database = `pgonce_bench_${spec.info.id.replace(/-/g, '_')}`
  try {
    await inFreshDatabase(spec, serverUrl, settings, database, async (ctx) => {
      // Every pass starts from the same server state: the previous pass's dirty pages written out, not flushed in the
      // background during this one's first workloads. Needs superuser (or pg_checkpoint); skipped if refused.
      if (ctx.admin) await ctx.admin.query('checkpoint').catch((err: Error) => log(`checkpoint skipped: ${err.message}`))
      await warmUp(ctx)
      for (const id of workloads) {
        const started = performance.now()
        try {
          const result = OWN_DATABASE.has(id)
            ? await inFreshDatabase(spec, serverUrl, settings, `${database}_${id.toLowerCase()}`, WORKLOADS[id])
            : await WORKLOADS[id](ctx)
          pass.workloads[id] = result
          log(`${name} ${id}: ${summary(result)} (${((performance.now() - started) / 1000).toFixed(1)} s)`)
        } catch (err) {
          pass.errors[id] = errorText(err)
          log(`${name} ${id} failed: ${pass.errors[id]}`)
        }
      }
    })
  } catch (err) {
    pass.errors.open = errorText(err)
    log(`${name} failed: ${pass.errors.open}`)
  }
  return pass
}

