// Workload sizes (scaled by BENCH_SCALE) and run settings, read from the environment.

/**
 * What is done to a system's database right before each timed section: `as-is` nothing (the tables as the workloads
 * left them: a fresh table is unanalysed), `analysed` a `VACUUM ANALYZE` of the database and a `CHECKPOINT`.
 */
export type Mode = 'as-is' | 'analysed'
export const MODES: readonly Mode[] = ['as-is', 'analysed']
export const MODE_LABEL: Record<Mode, string> = { 'as-is': 'as is', analysed: 'analysed' }

export interface Sizes {
  w1Adds: number
  w2Adds: number
  w3Jobs: number
  w4Jobs: number
  /** W5: adds over w5Adds / 10 keys. */
  w5Adds: number
  w6Samples: number
  w7Samples: number
  /** W8: jobs queued before processing starts (0 skips W8), and how many of them (from the head) are timed. */
  w8Queued: number
  w8Window: number
  /** W6's idle pause before every sample, in ms. */
  w6PauseMs: number
  producers: number
  bulkBatch: number
  /** Untimed operations of a workload's own kind before its timed section (V8, plans and connections warm). */
  warmup: number
}

export interface RunSettings {
  sizes: Sizes
  scale: number
  /** BENCH_SYSTEMS: system ids to run; all when null. */
  systems: string[] | null
  /** BENCH_WORKLOADS: e.g. `W1,W4`; all when null. */
  workloads: string[] | null
  modes: Mode[]
  /** BENCH_BASELINE: a git ref whose pgonce runs as one more system, or null. */
  baseline: string | null
  /** BENCH_ROUNDS: rotating rounds per workload and mode after the passes; 0 skips them. */
  rounds: number
  redisUrl: string
}

function numberFrom(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name]?.trim()
  if (!raw) return fallback
  const value = Number(raw)
  if (!Number.isFinite(value) || value < 0)
    throw new Error(`${name} must be a non-negative number, got ${JSON.stringify(raw)}`)
  return value
}

const list = (raw: string | undefined): string[] | null =>
  raw?.trim()
    ? raw
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean)
    : null

export function settingsFromEnv(env: NodeJS.ProcessEnv = process.env): RunSettings {
  const scale = numberFrom(env, 'BENCH_SCALE', 1)
  if (scale === 0) throw new Error('BENCH_SCALE must be above 0')
  const scaled = (n: number, min: number): number => Math.max(min, Math.round(n * scale))
  const w8Queued = Math.round(1_000_000 * numberFrom(env, 'BENCH_W8_SCALE', scale))
  const modes = list(env.BENCH_MODES?.toLowerCase()) ?? [...MODES]
  for (const m of modes)
    if (!(MODES as readonly string[]).includes(m)) throw new Error(`BENCH_MODES: unknown mode ${m}`)
  const rounds = numberFrom(env, 'BENCH_ROUNDS', 6)
  if (rounds === 1 || !Number.isInteger(rounds))
    throw new Error('BENCH_ROUNDS must be 0 (none) or a whole number of at least 2')
  return {
    sizes: {
      w1Adds: scaled(5000, 100),
      w2Adds: scaled(10_000, 200),
      w3Jobs: scaled(50_000, 2000),
      w4Jobs: scaled(100_000, 1000),
      w5Adds: scaled(1000, 20) * 10,
      w6Samples: scaled(500, 50),
      w7Samples: scaled(2000, 100),
      w8Queued,
      w8Window: Math.min(w8Queued, scaled(100_000, 1000)),
      w6PauseMs: 10,
      producers: 16,
      bulkBatch: 1000,
      // V8 compiles every client library's hot paths over the first few hundred calls; with 20, as at first, those
      // compilations landed in the timed samples and moved every system's p99 from run to run.
      warmup: 200,
    },
    scale,
    systems: list(env.BENCH_SYSTEMS),
    workloads: list(env.BENCH_WORKLOADS?.toUpperCase()),
    modes: MODES.filter((m) => modes.includes(m)),
    baseline: env.BENCH_BASELINE?.trim() || null,
    rounds,
    redisUrl: env.REDIS_URL ?? 'redis://127.0.0.1:6379',
  }
}
