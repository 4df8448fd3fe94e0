// One pass: a system in one configuration and one maintenance mode, in a fresh database of the server, its workloads
// one after another in table order; W4, W4B and W8 each in a fresh database of its own.

import pg from 'pg'
import type { Mode, RunSettings, Sizes } from './config.js'
import { MODE_LABEL } from './config.js'
import { benchDatabase, dropDatabase, freshDatabase } from './databases.js'
import { errorText } from './measure.js'
import {
  COMMON_WORKLOADS,
  type BenchSystem,
  type SystemConfig,
  type SystemInfo,
  WORKLOAD_IDS,
  type WorkloadId,
} from './systems/system.js'
import { type DrainContext, type WorkloadResult, maintain, probe } from './workloads/context.js'
import { DRAINS, type DrainId, isDrain } from './workloads/drain.js'
import { openTimed } from './workloads/timed.js'

export const log = (message: string): void => {
  process.stderr.write(`[bench] ${message}\n`)
}

export interface PassSpec {
  info: SystemInfo
  config: string
  mode: Mode
}

export interface PassRun {
  config: string
  mode: Mode
  workloads: Partial<Record<WorkloadId, WorkloadResult>>
  /** Why a workload (or opening the system) failed. */
  errors: Partial<Record<WorkloadId | 'open', string>>
}

/** The operations a pass times for each workload. */
export function passSize(id: WorkloadId, s: Sizes): number {
  const sizes: Record<WorkloadId, number> = {
    W1: s.w1Adds,
    W2: s.w2Adds,
    W3: s.w3Jobs,
    W4: s.w4Jobs,
    W4B: s.w4Jobs,
    W5: s.w5Adds,
    W6: s.w6Samples,
    W7: s.w7Samples,
    W8: s.w8Window,
  }
  return sizes[id]
}

/** The workloads `config` competes in, of those this run selected. */
export function workloadsOf(config: SystemConfig, settings: RunSettings): WorkloadId[] {
  return WORKLOAD_IDS.filter((id) => (config.workloads ?? COMMON_WORKLOADS).includes(id))
    .filter((id) => !settings.workloads || settings.workloads.includes(id))
    .filter((id) => id !== 'W8' || settings.sizes.w8Queued > 0)
}

/** The Redis URL with a key prefix of this run's own, so that it never touches anyone else's keys. */
function redisTarget(redisUrl: string): string {
  const url = new URL(redisUrl)
  url.searchParams.set('prefix', `pgonce-bench-${process.pid}-${Date.now().toString(36)}`)
  return url.toString()
}

/** Opens `spec`'s system in the fresh database `database` (or under a fresh Redis prefix), runs `fn`, closes it all. */
export async function inFreshDatabase<T>(
  spec: PassSpec,
  serverUrl: string,
  settings: RunSettings,
  database: string,
  fn: (ctx: DrainContext) => Promise<T>,
): Promise<T> {
  const postgres = spec.info.backend === 'postgres'
  const url = postgres ? await freshDatabase(serverUrl, database) : redisTarget(settings.redisUrl)
  const admin = postgres ? new pg.Pool({ connectionString: url, max: 1 }) : null
  // Ended before the forced drop of the database, which can still reach its closing client (see bench/databases.ts).
  admin?.on('error', () => {})
  try {
    // Every pass and drain starts from the same server state: the previous one's dirty pages written out, not
    // flushed in the background during this one. Needs superuser (or pg_checkpoint); skipped if refused.
    await admin?.query('checkpoint').catch(() => {})
    const system = await spec.info.open(url, spec.config)
    try {
      return await fn({
        info: spec.info,
        config: spec.config,
        system,
        url,
        sizes: settings.sizes,
        admin,
        mode: spec.mode,
      })
    } finally {
      await system.close()
    }
  } finally {
    await admin?.end()
    if (postgres) await dropDatabase(serverUrl, database)
  }
}

/**
 * W4 or W8 in a database of its own: the jobs earlier workloads left waiting in other queues would weigh on it (they
 * did on graphile-worker, whose fetch walks past waiting jobs of tasks it does not handle). Throws on a wrong outcome
 * when `strict` (a round); a pass records it.
 */
export async function runDrain(
  spec: PassSpec,
  id: DrainId,
  serverUrl: string,
  settings: RunSettings,
  strict = true,
): Promise<WorkloadResult> {
  const database = benchDatabase(`${spec.info.id.replace(/-/g, '_')}_${id.toLowerCase()}`)
  const result = await inFreshDatabase(spec, serverUrl, settings, database, DRAINS[id])
  if (strict && !result.correct) throw new Error(`${spec.info.label} ${id}: ${result.note ?? 'wrong outcome'}`)
  return result
}

/** One of W1–W3, W5–W7 on the pass's system: warm-up, the mode's maintenance, one timed section, the check. */
async function timedPass(
  id: Exclude<WorkloadId, DrainId>,
  system: BenchSystem,
  admin: pg.Pool | null,
  settings: RunSettings,
  mode: Mode,
): Promise<WorkloadResult> {
  const n = passSize(id, settings.sizes)
  const timed = await openTimed(id, system, settings.sizes)
  try {
    await timed.warm()
    await maintain(admin, mode)
    const { value, ...probed } = await probe(admin, n, () => timed.run(n, 0))
    const wrong = await timed.check()
    return { ops: n, ...probed, ...value, correct: wrong === null, ...(wrong ? { note: wrong } : {}) }
  } finally {
    await timed.close()
  }
}

function summary(r: WorkloadResult): string {
  const figures =
    r.perSecond !== undefined
      ? `${Math.round(r.perSecond)}/s`
      : `p50 ${r.p50Ms?.toFixed(2)} ms, p99 ${r.p99Ms?.toFixed(2)} ms`
  return `${figures}${r.correct ? '' : ` WRONG: ${r.note}`}`
}

/** One pass over `workloads`, in table order. */
export async function runPass(
  spec: PassSpec,
  workloads: WorkloadId[],
  serverUrl: string,
  settings: RunSettings,
  letter: string,
): Promise<PassRun> {
  const pass: PassRun = { config: spec.config, mode: spec.mode, workloads: {}, errors: {} }
  const name = `${spec.info.label} [${letter}] ${MODE_LABEL[spec.mode]}`
  const database = benchDatabase(spec.info.id.replace(/-/g, '_'))
  try {
    await inFreshDatabase(spec, serverUrl, settings, database, async ({ system, admin }) => {
      for (const id of workloads) {
        const started = performance.now()
        try {
          const result = isDrain(id)
            ? await runDrain(spec, id, serverUrl, settings, false)
            : await timedPass(id, system, admin, settings, spec.mode)
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
