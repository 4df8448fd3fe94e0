// queue.retryJob: gives a failed job a fresh run, refusing with a RetryJobError instead of ever letting a 23505 escape.

import type { Execute } from './db/executor.js'
import { sqlFor } from './db/sql-files.js'
import type { JobRow } from './job.js'

/** Why `retryJob` refused; nothing was changed. */
export type RetryJobCode = 'NOT_FOUND' | 'NOT_FAILED' | 'JOB_ID_LIVE' | 'KEY_HELD'

const MESSAGES: Record<RetryJobCode, string> = {
  NOT_FOUND: 'no such job',
  NOT_FAILED: 'only a failed job can be retried',
  JOB_ID_LIVE: 'a newer live generation of its jobId exists; that one stands for the job now',
  KEY_HELD: 'its deduplication key is held by another job, which stands for the same work now',
}

export class RetryJobError extends Error {
  override readonly name = 'RetryJobError'
  constructor(
    /** Stable machine-readable reason. */
    readonly code: RetryJobCode,
    /** `job.id` of the job that was to be retried. */
    readonly jobId: string,
  ) {
    super(`cannot retry job ${jobId}: ${MESSAGES[code]}`)
  }
}

/**
 * Moves failed job `id` back to 'waiting' with its attempts reset, in one statement
 * that wakes the queue's workers. It takes its dedup key back while it is live (an
 * add of that key meanwhile answers with it), runs as a replay (guard its effects
 * with `ctx.effect`), and is refused while another job holds that key or another
 * live generation has its jobId.
 */
export async function retryFailedJob(execute: Execute, schema: string, queue: string, id: string): Promise<JobRow> {
  let rows: (JobRow & { error: RetryJobCode | null })[]
  try {
    rows = await execute<JobRow & { error: RetryJobCode | null }>(sqlFor('retry-job', schema), [queue, id])
  } catch (err) {
    // A new generation of its jobId went live between the check and the update.
    if ((err as { code?: string }).code === '23505') throw new RetryJobError('JOB_ID_LIVE', id)
    throw err
  }
  const [row] = rows
  if (row === undefined) throw new RetryJobError('NOT_FOUND', id)
  if (row.error !== null) throw new RetryJobError(row.error, id)
  return row
}
