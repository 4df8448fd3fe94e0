// Workload sizes (issue 6 defaults, scaled by BENCH_SCALE) and run settings, read from the environment.

/**
 * What is done to the system's database right before each timed section: `as-is` nothing (the tables as the
 * workloads left them, statistics as autovacuum had them: a fresh table is unanalysed), `analysed` a `VACUUM ANALYZE`
 * of the database (which holds only this system's tables) and a `CHECKPOINT`.
 */
export type Mode = 'as-is' | 'analysed'
export const MODES: readonly Mode[] = ['as-is', 'analysed']

export interface Sizes {
  /** W1: sequential awaited adds. */
  w1Adds: number
  /** W2: adds from `producers` concurrent producers. */
  w2Adds: number
  /** W3: jobs added in bulk batches of `bulkBatch`. */
  w3Jobs: number
  /** W4: queued no-op jobs drained with concurrency 16. */
  w4Jobs: number
  /** W5: dedup adds over `w5Keys` keys from `producers` producers. */
  w5Adds: number
  w5Keys: number
  /** W6: enqueue-to-handler-start samples (after `warmup` discarded ones). */
  w6Samples: number
  /** W6: idle pause before every sample (and before every sample of the bare INSERT + pg_notify reference). */
  w6PauseMs: number
  /** W7: duplicate-add samples (after `warmup` discarded ones). */
  w7Samples: number
  /** W8: jobs queued before processing starts; 0 skips W8. */
  w8Queued: number
  /** W8: jobs processed (from the head of that backlog) to measure throughput. */
  w8Window: number
  producers: number
  bulkBatch: number
  warmup: number
}

export interface RunSettings {
  sizes: Sizes
  scale: number
  /** System ids to run (BENCH_SYSTEMS, comma-separated), all by default. */
  systems: string[] | null
  /** Workloads to run (BENCH_WORKLOADS, e.g. `W1,W4`), all by default. */
  workloads: string[] | null
  /** Seconds per pgbench measurement; 0 skips them. */
  pgbenchSeconds: number
  /** BENCH_MODES: which maintenance modes to run (`as-is`, `analysed`); both by default. */
  modes: Mode[]
  /** BENCH_CONFIGS=first: only each system's first configuration (quick runs); all candidates by default. */
  firstConfigOnly: boolean
  /** BENCH_BASELINE: a git ref whose pgonce runs beside the working tree's, or null. */
  baseline: string | null
  /** BENCH_LIMITS=0 skips the physical-limit probes from Node. */
  limits: boolean
  /** BENCH_MATERIAL: the relative difference between the two modes above which both rows are printed (default 0.15). */
  material: number
  redisUrl: string
  /** BENCH_NOTE: a line about the conditions of this run (e.g. a shared machine), printed under the table. */
  note: string | null
  /** BENCH_ORDER=reverse runs the systems last to first (the table keeps its order): a check for an order effect. */
  reverse: boolean
}

function numberFrom(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name]
  if (raw === undefined || raw.trim() === '') return fallback
  const value = Number(raw)
  if (!Number.isFinite(value) || value < 0) throw new Error(`${name} must be a non-negative number, got ${JSON.stringify(raw)}`)
  return value
}

const scaled = (n: number, scale: number, min = 1): number => Math.max(min, Math.round(n * scale))

export function settingsFromEnv(env: NodeJS.ProcessEnv = process.env): RunSettings {
  const scale = numberFrom(env, 'BENCH_SCALE', 1)
  if (scale === 0) throw new Error('BENCH_SCALE must be above 0')
  const w8Scale = numberFrom(env, 'BENCH_W8_SCALE', scale)
  const w5Keys = scaled(1000, scale, 10)
  const w8Queued = Math.round(1_000_000 * w8Scale)
  const sizes: Sizes = {
    w1Adds: scaled(5000, scale),
    w2Adds: scaled(10_000, scale),
    w3Jobs: scaled(50_000, scale, 1000),
    w4Jobs: numberFrom(env, 'BENCH_W4_JOBS', scaled(100_000, scale, 1000)),
    w5Adds: w5Keys * 10,
    w5Keys,
    w6Samples: scaled(500, scale, 50),
    w6PauseMs: numberFrom(env, 'BENCH_W6_PAUSE_MS', 10),
    w7Samples: scaled(2000, scale, 100),
    w8Queued,
    w8Window: Math.min(w8Queued, numberFrom(env, 'BENCH_W8_WINDOW', scaled(100_000, scale, 1000))),
    producers: 16,
    bulkBatch: 1000,
    warmup: numberFrom(env, 'BENCH_WARMUP', 200),
  }
  const list = (raw: string | undefined): string[] | null =>
    raw?.trim() ? raw.split(',').map((s) => s.trim()).filter(Boolean) : null
  const modes = (list(env.BENCH_MODES?.toLowerCase()) ?? [...MODES]).map((m) => {
    if (!(MODES as readonly string[]).includes(m)) throw new Error(`BENCH_MODES: unknown mode ${m} (known: ${MODES.join(', ')})`)
    return m as Mode
  })
  const order = env.BENCH_ORDER?.trim() || 'table'
  if (order !== 'table' && order !== 'reverse') throw new Error(`BENCH_ORDER must be table or reverse, got ${JSON.stringify(order)}`)
  const configs = env.BENCH_CONFIGS?.trim() || 'all'
  if (configs !== 'all' && configs !== 'first') throw new Error(`BENCH_CONFIGS must be all or first, got ${JSON.stringify(configs)}`)
  return {
    sizes,
    scale,
    systems: list(env.BENCH_SYSTEMS),
    workloads: list(env.BENCH_WORKLOADS?.toUpperCase()),
    pgbenchSeconds: numberFrom(env, 'BENCH_PGBENCH_SECONDS', 10),
    modes: MODES.filter((m) => modes.includes(m)),
    firstConfigOnly: configs === 'first',
    baseline: env.BENCH_BASELINE?.trim() || null,
    limits: env.BENCH_LIMITS?.trim() !== '0',
    material: numberFrom(env, 'BENCH_MATERIAL', 0.15),
    redisUrl: env.BENCH_REDIS_URL ?? env.REDIS_URL ?? 'redis://127.0.0.1:6379',
    note: env.BENCH_NOTE?.trim() || null,
    reverse: order === 'reverse',
  }
}
