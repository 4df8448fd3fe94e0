// What a pass records of a workload, what a drain is given, and the helpers they share (maintenance, round trips
// and WAL around a timed section, payloads, backlogs).

import type pg from 'pg'
import type { Mode, Sizes } from '../config.js'
import { countRoundTrips } from '../round-trips.js'
import type { BenchSystem, SystemInfo } from '../systems/system.js'

export interface WorkloadResult {
  /** Adds or jobs timed. */
  ops: number
  ms: number
  perSecond?: number
  p50Ms?: number
  p99Ms?: number
  /** Queries sent through node-postgres per op (producer and consumer side). */
  roundTripsPerOp?: number
  /** WAL bytes per op (server-wide, so other load on the server inflates it). */
  walBytesPerOp?: number
  /** W4/W8: the consumer process's peak RSS while processing, and its RSS just before. */
  peakRssMb?: number
  startRssMb?: number
  /** False when the outcome was wrong (a wrong job count, lost jobs); `note` says what. */
  correct: boolean
  note?: string
}

/** A system opened in a fresh database for one drain. */
export interface DrainContext {
  info: SystemInfo
  config: string
  system: BenchSystem
  /** The system's database (or the Redis URL). */
  url: string
  sizes: Sizes
  /** On the system's database; null for the Redis reference. */
  admin: pg.Pool | null
  mode: Mode
}

/** `mode`'s maintenance on the database `admin` is connected to (nothing for `as-is`, or without a database). */
export async function maintain(admin: pg.Pool | pg.Client | null, mode: Mode): Promise<void> {
  if (mode === 'as-is' || !admin) return
  await admin.query('vacuum analyze')
  // Needs superuser (or pg_checkpoint); a refusal leaves the vacuum alone.
  await admin.query('checkpoint').catch(() => {})
}

export async function walPosition(db: pg.Pool | pg.Client): Promise<string> {
  const { rows } = await db.query<{ lsn: string }>('select pg_current_wal_lsn()::text as lsn')
  return (rows[0] as { lsn: string }).lsn
}

export async function walBytesSince(db: pg.Pool | pg.Client, from: string): Promise<number> {
  const { rows } = await db.query<{ bytes: string }>(
    'select pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::bigint::text as bytes',
    [from],
  )
  return Number((rows[0] as { bytes: string }).bytes)
}

/** Runs `timed` and measures the queries this process sent and the WAL the server wrote meanwhile, per op. */
export async function probe<T>(
  admin: pg.Pool | null,
  ops: number,
  timed: () => Promise<T>,
): Promise<{ value: T; ms: number } & Pick<WorkloadResult, 'roundTripsPerOp' | 'walBytesPerOp'>> {
  const sentSoFar = countRoundTrips()
  const wal = admin ? await walPosition(admin) : null
  const before = sentSoFar()
  const started = performance.now()
  const value = await timed()
  const ms = performance.now() - started
  const sent = sentSoFar() - before
  return {
    value,
    ms,
    ...(admin && wal !== null
      ? { roundTripsPerOp: sent / ops, walBytesPerOp: (await walBytesSince(admin, wal)) / ops }
      : {}),
  }
}

/** `count` job payloads numbered from `from`. */
export function payloads(from: number, count: number): { i: number }[] {
  return Array.from({ length: count }, (_, k) => ({ i: from + k }))
}

/** Adds `total` jobs to `queue` in bulk batches from `producers` loops (untimed set-up of W4 and W8). */
export async function enqueueBacklog(ctx: DrainContext, queue: string, total: number, producers = 1): Promise<number> {
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
