// The order in which a Worker's parts start and stop. Each part knows how to start and stop itself; this file owns
// the order, which is what keeps a start from missing an add and a close from losing or double-running a job.

import type pg from 'pg'
import type { PgoncePool } from '../db/pool.js'
import type { Cache } from '../cache/cache.js'
import type { Effects } from '../effects.js'
import type { Logger } from '../logger.js'
import { migrateUntilDone } from '../migrate/runner.js'
import type { Fetcher } from './fetcher.js'
import type { Housekeeping } from './housekeeping.js'
import type { JobRunner } from './job-runner.js'
import type { Leases } from './leases.js'
import type { Notifier } from './notifier.js'
import type { Schedules } from './schedules.js'
import type { StepBatcher } from './step-batcher.js'

export interface WorkerParts<Data, Result> {
  pool: pg.Pool
  /** The pool pgonce opened (and ends), null for yours. */
  owned: PgoncePool | null
  schema: string
  cache: Cache | undefined
  effects: Effects
  notifier: Notifier
  fetcher: Fetcher
  runner: JobRunner<Data, Result>
  steps: StepBatcher
  leases: Leases<Data>
  housekeeping: Housekeeping
  schedules: Schedules
}

/**
 * Migrations (retried with backoff while the database is unreachable), the Redis cache, LISTEN, then the timers and
 * the first claim: LISTEN comes before the first claim, so that nothing added in between goes unnoticed. Returns
 * false, having started nothing, when `aborted()` turned true meanwhile (closed while starting).
 */
export async function startParts<Data, Result>(p: WorkerParts<Data, Result>, opts: { migrate: boolean; listen: boolean },
  logger: Logger, aborted: () => boolean, report: (err: Error) => void): Promise<boolean> {
  if (opts.migrate) await migrateUntilDone({ pool: p.pool, schema: p.schema, logger }, aborted, report)
  if (aborted()) return false
  await p.cache?.start()
  if (opts.listen) await p.notifier.start()
  if (aborted()) return false
  p.leases.start()
  p.housekeeping.start()
  p.schedules.start()
  p.fetcher.start()
  return true
}

/**
 * Claims and hand-offs stop first (a claim in flight returns and its jobs are held), then the jobs not started go back to the
 * queue, then the running handlers get `closeTimeoutMs`; only then do leases and outcome writes stop (`closed()`
 * marks the point after which a late handler's job is left to the rescue), and the connections end last.
 */
export async function stopParts<Data, Result>(p: WorkerParts<Data, Result>, wasRunning: boolean, closeTimeoutMs: number,
  closed: () => void): Promise<void> {
  if (wasRunning) {
    p.runner.refuseNewStarts()
    // No more hand-offs or wake-ups for this worker; one already sent is given back (the runner refuses it).
    p.notifier.withdraw()
    await p.fetcher.stop()
    await p.runner.stop()
    await p.runner.finish(closeTimeoutMs)
  }
  p.leases.stop()
  p.steps.stop()
  closed()
  await p.housekeeping.stop()
  await p.schedules.stop()
  await p.notifier.stop()
  await p.effects.close()
  await p.cache?.close()
  await p.owned?.end()
}

/** A close that ran out of time: the LISTEN connection and the pool's connections are dropped, what waits on them fails. */
export function abandonParts<Data, Result>(p: WorkerParts<Data, Result>, logger: Logger): void {
  logger.warn('pgonce: close ran out of time; dropping the connections (jobs not given back are rescued after their lease)')
  p.notifier.abandon()
  p.owned?.abandon()
}
