// `npm run bench`: the workloads on pgonce and its peers (each peer in every candidate configuration, each in both
// maintenance modes, each pass in fresh databases of one server), the physical limits from Node on pgonce's jobs table,
// and optionally pgonce at BENCH_BASELINE; prints the table, writes bench/results/<date>-<host>[-n].json.

import { mkdirSync, writeFileSync } from 'node:fs'
import pg from 'pg'
import { startPostgres } from '../dev/postgres-server.js'
import { type Baseline, checkOutBaseline } from './baseline.js'
import { type RunSettings, settingsFromEnv } from './config.js'
import { dropDatabase, freshDatabase } from './databases.js'
import { type LimitPass, measureLimits } from './limits.js'
import { describeMachine, redisVersion } from './machine.js'
import { runProducers } from './measure.js'
import { measureServerLimits } from './pgbench.js'
import { MODE_LABEL, recordBest, renderMarkdown } from './report.js'
import { countRoundTrips } from './round-trips.js'
import type { BenchRun, ConfigRun, PassRun, SystemRun } from './run-result.js'
import { allSystems } from './systems/registry.js'
import { type SystemConfig, type SystemInfo, WORKLOAD_IDS } from './systems/system.js'
import { bulkAdds, concurrentAdds, sequentialAdds } from './workloads/add-throughput.js'
import { type Mode, type WorkloadContext, type WorkloadId, type WorkloadResult, maintain, payloads } from './workloads/context.js'
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

interface PassSpec {
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

/** The workloads `config` competes in, of those this run selected. */
function workloadsOf(config: SystemConfig, settings: RunSettings): WorkloadId[] {
  return WORKLOAD_IDS.filter((id) => (config.workloads ?? WORKLOAD_IDS).includes(id))
    .filter((id) => !settings.workloads || settings.workloads.includes(id))
    .filter((id) => id !== 'W8' || settings.sizes.w8Queued > 0)
}

/** One pass: fresh database, CHECKPOINT, warm-up, then `workloads` in table order (W4 and W8 in databases of their own). */
async function runPass(spec: PassSpec, workloads: WorkloadId[], serverUrl: string, settings: RunSettings, letter: string): Promise<PassRun> {
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
          pass.errors[id] = err instanceof Error ? err.stack ?? err.message : String(err)
          log(`${name} ${id} failed: ${pass.errors[id]}`)
        }
      }
    })
  } catch (err) {
    pass.errors.open = err instanceof Error ? err.stack ?? err.message : String(err)
    log(`${name} failed: ${pass.errors.open}`)
  }
  return pass
}

/** Footnote letters for every configuration of every system, in table order: a, b, c, … */
function assignLetters(systems: SystemInfo[], settings: RunSettings): Map<SystemInfo, ConfigRun[]> {
  const out = new Map<SystemInfo, ConfigRun[]>()
  let n = 0
  for (const info of systems) {
    const configs = settings.firstConfigOnly ? info.configs.slice(0, 1) : info.configs
    out.set(info, configs.map((c) => ({
      key: c.key,
      letter: String.fromCharCode(97 + n++),
      purpose: c.purpose,
      lines: c.lines,
      workloads: workloadsOf(c, settings),
    })).filter((c) => c.workloads.length > 0))
  }
  return out
}

async function benchSystem(info: SystemInfo, configs: ConfigRun[], serverUrl: string, settings: RunSettings): Promise<SystemRun> {
  const run: SystemRun = { id: info.id, label: info.label, backend: info.backend, common: info.common, configs, passes: [], best: {} }
  for (const config of configs) {
    for (const mode of settings.modes) {
      // Redis has no tables to vacuum: its reference column runs as is only.
      if (info.backend === 'redis' && mode === 'analysed') continue
      run.passes.push(await runPass({ info, config: config.key, mode }, config.workloads, serverUrl, settings, config.letter))
    }
  }
  recordBest(run, settings.modes)
  return run
}

function notes(settings: RunSettings, redis: string | null): string[] {
  const s = settings.sizes
  return [
    ...(settings.note ? [settings.note] : []),
    ...(settings.reverse ? ['BENCH_ORDER=reverse: the systems ran in the reverse of the table\'s order (the last column first).'] : []),
    'Each pass (a system in one configuration and one mode) runs alone, in a fresh database of the same server, after a CHECKPOINT and a short untimed warm-up; ' +
      'its workloads run one after another in table order, W4 and W8 each in a fresh database of their own (without the jobs W1–W3 left waiting in other queues).',
    `Modes: "${MODE_LABEL['as-is']}" times each workload on the tables as the earlier ones left them (a fresh table is unanalysed, W8's backlog is not vacuumed); ` +
      `"${MODE_LABEL.analysed}" runs VACUUM ANALYZE on the system's database and a CHECKPOINT right before each timed section (after the backlog is loaded for W4/W8).`,
    'W4 and W8 run the consumer in a child process (also the source of the RSS figures). W4 is timed from the first handler start until the system reports every job completed; ' +
      `W8 from the first handler start to the ${s.w8Window.toLocaleString('en-US')}th.`,
    `W6: producer and worker in one process; each sample waits ${s.w6PauseMs} ms with nothing in flight, then calls add() and waits until add() has returned and the handler has started; ` +
      'latency = add() called → handler started. The INSERT + pg_notify limit runs the same loop (statement returned and notification received on a LISTENing connection).',
    `W6 and W7 time their samples after ${s.warmup} untimed ones of the same kind.`,
    'W5 and W7 use each system\'s own dedup feature (configuration below); a wrong job count is marked ✗.',
    'pgonce ÷ best Postgres peer: the best of graphile-worker, pg-boss and BullMQ-on-PostgreSQL, each at its best configuration for that workload and mode (the letter after the ratio). ' +
      'For W6 and W7 the ratio is of p50 latencies (below 1 is faster).',
    redis
      ? 'BullMQ on Redis is a reference, not a Postgres peer: it is left out of the ratio column.'
      : `Redis did not answer at ${settings.redisUrl}: the BullMQ on Redis reference column was skipped.`,
    ...(s.w8Queued === 0 ? ['W8 skipped (BENCH_W8_SCALE=0).'] : []),
    ...(settings.limits ? [] : ['Physical limits not measured (BENCH_LIMITS=0).']),
    ...(settings.firstConfigOnly ? ['BENCH_CONFIGS=first: each system in its first configuration only (not at its best).'] : []),
  ]
}

function writeResult(run: BenchRun, settings: RunSettings, startedAt: Date): void {
  const dir = new URL('./results/', import.meta.url)
  mkdirSync(dir, { recursive: true })
  // A scaled or partial run never overwrites the figures of a full one, and a full run never overwrites an earlier
  // one of the same day (it takes the next free -2, -3, …); a partial run replaces the previous partial one.
  const partial = Boolean(settings.systems || settings.workloads || settings.firstConfigOnly || settings.modes.length < 2)
  const tag = `${settings.scale === 1 ? '' : `-scale${settings.scale}`}${partial ? '-partial' : ''}`
  const stem = `${startedAt.toISOString().slice(0, 10)}-${run.machine.host.replace(/[^A-Za-z0-9_.-]/g, '_')}${tag}`
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
}

const settings = settingsFromEnv()
const startedAt = new Date()
const server = await startPostgres(log)
let baseline: Baseline | null = null
try {
  const redis = await redisVersion(settings.redisUrl)
  const machine = await describeMachine(server.url, server.kind, redis)
  log(`sizes ${JSON.stringify(settings.sizes)}; modes ${settings.modes.join(', ')}`)
  if (settings.baseline) baseline = await checkOutBaseline(settings.baseline, log)
  const pgbench = settings.pgbenchSeconds > 0
    ? await measureServerLimits(server.url, settings.pgbenchSeconds)
    : { skipped: 'not measured (BENCH_PGBENCH_SECONDS=0)' }
  log(`pgbench reference ${JSON.stringify(pgbench)}`)
  const limits: LimitPass[] = []
  if (settings.limits) for (const mode of settings.modes) limits.push(await measureLimits(server.url, settings, mode, log))
  // The baseline pgonce runs whenever pgonce does.
  const selected = (id: string): boolean => !settings.systems || settings.systems.includes(id) ||
    (id === 'pgonce-baseline' && settings.systems.includes('pgonce'))
  const chosen = allSystems().filter((s) => selected(s.id)).filter((s) => s.backend === 'postgres' || redis !== null)
  const letters = assignLetters(chosen, settings)
  const ran = new Map<SystemInfo, SystemRun>()
  for (const info of settings.reverse ? [...chosen].reverse() : chosen) {
    ran.set(info, await benchSystem(info, letters.get(info) ?? [], server.url, settings))
  }
  const systems = chosen.map((info) => ran.get(info) as SystemRun)
  const run: BenchRun = {
    startedAt: startedAt.toISOString(),
    seconds: (Date.now() - startedAt.getTime()) / 1000,
    machine,
    scale: settings.scale,
    sizes: settings.sizes,
    modes: settings.modes,
    material: settings.material,
    limits,
    pgbench,
    baseline: baseline ? { ref: baseline.ref, sha: baseline.sha, short: baseline.short, lockfileDiffers: baseline.lockfileDiffers } : null,
    systems,
    notes: notes(settings, redis),
  }
  process.stdout.write(`${renderMarkdown(run)}\n`)
  writeResult(run, settings, startedAt)
} finally {
  await baseline?.remove()
  await server.stop()
}
