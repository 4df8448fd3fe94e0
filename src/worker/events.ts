// The events a Worker emits.

import type { Job } from '../job.js'

/** The Worker's events. */
export type WorkerEvents<Data, Result> = {
  /** A job's completion was recorded; `result` is what is stored as `job.result`. */
  completed: [job: Job<Data>, result: Result]
  /** An attempt failed and was recorded; `job.state` says what follows: `waiting`/`delayed` (retried) or `failed` (for good). */
  failed: [job: Job<Data>, error: Error]
  /** The job ended `cancelled` (`queue.cancelJob` while it ran). */
  cancelled: [job: Job<Data>]
  /** Something went wrong outside a handler (a statement failed, a lease was lost). Never crashes the process: see `logger`. */
  error: [error: Error]
}
