// What every workload gets (the opened system, sizes, probes) and what it reports.

import type pg from 'pg'
import type { Mode, Sizes } from '../config.js'
import type { BenchSystem, SystemInfo } from '../systems/system.js'
import { walBytesSince, walPosition } from '../wal.js'

export type { WorkloadId } from '../systems/system.js'
export { MODES, type Mode } from '../config.js'

/** How each mode is named in the table and the log. */
export const MODE_LABEL: Record<Mode, string> = { 'as-is': 'as is', analysed: 'after VACUUM ANALYZE + CHECKPOINT' }

export interface WorkloadResult {
  /** Adds or jobs timed. */
  ops: number
  ms: number
  /** Throughput workloads: ops per second. */
  perSecond?: number
  /** Latency workloads, in milliseconds. */
  p50Ms?: number
  p99Ms?: number
  /** W5: jobs that exist after the run, and how many must. */
  created?: number
  expected?: number
  /** Queries sent through node-postgres per op (producer and consumer side). */
  roundTripsPerOp?: number
  /** WAL bytes per op (server-wide, so other load on the server inflates it). */
  walBytesPerOp?: number
  /** W4/W8: the consumer process's peak RSS while processing, and its RSS just before. */
  peakRssMb?: number
  startRssMb?: number
  /** False when the outcome was wrong (wrong job count, lost jobs). */
  correct: boolean
  note?: string
}

export interface WorkloadContext {
  info: SystemInfo
  /** The key of the configuration `system` was opened in. */
  config: string
  system: BenchSystem
  /** Where the system lives: its fresh database, or the Redis URL. */
  url: string
  sizes: Sizes
  /** A pool on the system's database for WAL probes; null for the Redis reference. */
  admin: pg.Pool | null
  roundTrips: () => number
  mode: Mode
  /** Call right before starting the clock (after any untimed setup): applies `mode`'s maintenance. */
  beforeTimed: () => Promise<void>
}

/** `mode`'s maintenance on the database `admin` is connected to (nothing for `as-is`, or without a database). */
export async function maintain(admin: pg.Pool | pg.Client | null, mode: Mode): Promise<void> {
  if (mode === 'as-is' || !admin) return
  await admin.query('vacuum analyze')
  // Needs superuser (or pg_checkpoint); a refusal leaves the vacuum alone.
  await admin.query('checkpoint').catch(() => {})
}

/** Runs `timed` (which returns elapsed ms) and adds round trips and WAL per op around it. */
export async function probe(ctx: WorkloadContext, ops: number, timed: () => Promise<number>): Promise<Pick<WorkloadResult, 'ms' | 'roundTripsPerOp' | 'walBytesPerOp'>> {
  const wal = ctx.admin ? await walPosition(ctx.admin) : null
  const sentBefore = ctx.roundTrips()
  const ms = await timed()
  const sent = ctx.roundTrips() - sentBefore
  const walBytes = ctx.admin && wal !== null ? await walBytesSince(ctx.admin, wal) : null
  return {
    ms,
    ...(ctx.info.backend === 'postgres' ? { roundTripsPerOp: sent / ops } : {}),
    ...(walBytes !== null ? { walBytesPerOp: walBytes / ops } : {}),
  }
}

/** `count` job payloads numbered from `from`. */
export function payloads(from: number, count: number): { i: number }[] {
  return Array.from({ length: count }, (_, k) => ({ i: from + k }))
}

/** Adds `total` jobs to `queue` in bulk batches from `producers` loops (untimed setup for W4/W8). */
export async function enqueueBacklog(ctx: WorkloadContext, queue: string, total: number, producers = 1): Promise<number> {
  const batch = ctx.sizes.bulkBatch
  const batches = Math.ceil(total / batch)
  const started = performance.now()
  let next = 0
  const loop = async (): Promise<void> => {
    for (let b = next++; b < batches; b = next++) {
      await ctx.system.addBulk(queue, payloads(b * batch, Math.min(batch, total - b * batch)))
    }
  }
  await Promise.all(Array.from({ length: Math.min(producers, batches) }, loop))
  return performance.now() - started
}
