// queue.promoteJob: makes a delayed job due now, refusing with a PromoteJobError for a missing job or any other state.

import type { Execute } from './db/executor.js'
import { sqlFor } from './db/sql-files.js'
import type { JobRow, JobState } from './job.js'

/** Why `promoteJob` refused; nothing was changed. */
export type PromoteJobCode = 'NOT_FOUND' | 'NOT_DELAYED'

export class PromoteJobError extends Error {
  override readonly name = 'PromoteJobError'
  constructor(
    /** Stable machine-readable reason. */
    readonly code: PromoteJobCode,
    /** `job.id` of the job that was to be promoted. */
    readonly jobId: string,
    /** The job's state when it was not delayed; null when there is no such job. */
    readonly state: JobState | null,
  ) {
    super(
      `cannot promote job ${jobId}: ${state === null ? 'no such job' : `only a delayed job can be promoted (it is ${state})`}`,
    )
  }
}

/** Moves delayed job `id` to 'waiting', due now, in one statement that wakes the queue's workers. */
export async function promoteDelayedJob(execute: Execute, schema: string, queue: string, id: string): Promise<JobRow> {
  type Answer = Omit<JobRow, 'id'> & { id: string | null; found_state: JobState }
  const [row] = await execute<Answer>(sqlFor('promote-job', schema), [queue, id])
  if (row === undefined) throw new PromoteJobError('NOT_FOUND', id, null)
  if (row.id === null) throw new PromoteJobError('NOT_DELAYED', id, row.found_state)
  return row as JobRow
}
