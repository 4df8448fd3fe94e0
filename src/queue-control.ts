// Job and queue control for a Queue: cancel, remove, list, pause and resume, retention settings.

import type { Execute } from './db/executor.js'
import { sqlFor } from './db/sql-files.js'
import { type SettleRow, settleOf } from './cache/settle.js'
import { JOB_STATES, type JobRow, type JobState } from './job.js'
import { MAX_DURATION_MS, checkInteger, checkJobIdRef, checkOptions, fail } from './validate.js'

/** What `cancelJob` did. */
export type CancelOutcome =
  /** The job was pending (waiting, delayed, or waiting for its dependencies): it is cancelled. */
  | 'cancelled'
  /** Its handler is running: it was asked to stop (`ctx.signal` aborts) and ends `cancelled`. */
  | 'cancel-requested'
  /** It had finished already; nothing changed. */
  | 'already-finished'
  /** No such job in this queue. */
  | 'not-found'

/** Why `removeJob` refused; nothing changed. */
export type RemoveJobCode = 'ACTIVE'

/** `removeJob` refused: the job's handler is running (cancel it instead, or wait until it finishes). */
export class RemoveJobError extends Error {
  override readonly name = 'RemoveJobError'
  constructor(
    readonly code: RemoveJobCode,
    readonly jobId: string,
  ) {
    super(`cannot remove job ${jobId}: its handler is running (cancelJob asks it to stop)`)
  }
}

export interface GetJobsOptions {
  /** Only jobs in these states. (Default: every state) */
  states?: JobState[]
  /** Most jobs returned. (Default: 100) */
  limit?: number
  /** Only jobs with an id below this one: pass the last id of the previous page. (Default: from the newest) */
  after?: string
}

/** Retention of a queue's finished jobs, in Postgres (every process prunes by the same rule). */
export interface RetentionSettings {
  /** How long completed and cancelled jobs are kept, in ms; null: the default. (Default: 86400000, 24 hours) */
  completedMs?: number | null
  /** How long failed jobs (the dead-letter set) are kept, in ms; null: the default. (Default: 604800000, 7 days) */
  failedMs?: number | null
  /** Keep at most this many completed jobs of the queue (the newest); null: no cap. (Default: no cap) */
  maxCompleted?: number | null
}

const GET_JOBS_KEYS = ['states', 'limit', 'after'] as const
const RETENTION_KEYS = ['completedMs', 'failedMs', 'maxCompleted'] as const

export async function cancelJob(execute: Execute, schema: string, queue: string, id: string): Promise<CancelOutcome> {
  checkJobIdRef(id, 'id')
  const [row] = await execute<{ outcome: CancelOutcome }>(sqlFor('cancel-job', schema), [queue, id])
  return (row as { outcome: CancelOutcome }).outcome
}

/**
 * Removes a pending or finished job; `removed` false if there was none; throws RemoveJobError for a running one.
 * `settleMs`: how long to wait after the commit when Redis cannot be told (its key ended; `inCallerTx`: 0).
 */
export async function removeJob(
  execute: Execute,
  schema: string,
  queue: string,
  id: string,
  inCallerTx: boolean,
): Promise<{ removed: boolean; settleMs: number }> {
  checkJobIdRef(id, 'id')
  const rows = await execute<{ state: JobState | null; removed: boolean } & SettleRow>(sqlFor('remove-job', schema), [
    queue,
    id,
    !inCallerTx,
  ])
  const [row] = rows
  if (row?.state === 'active') throw new RemoveJobError('ACTIVE', id)
  return { removed: row?.removed ?? false, settleMs: settleOf(rows) }
}

/** Checks getJobs' options (before any I/O) and returns the statement's parameters. */
export function getJobsParams(queue: string, options: unknown): unknown[] {
  const o = checkOptions<GetJobsOptions>(options, 'options', GET_JOBS_KEYS)
  let states: JobState[] | null = null
  if (o.states !== undefined) {
    if (!Array.isArray(o.states)) fail('INVALID_TYPE', 'options.states', 'must be an array of job states')
    states = o.states.map((s, i) => {
      if (!JOB_STATES.includes(s))
        fail('INVALID_TYPE', `options.states[${i}]`, `must be one of ${JOB_STATES.join(', ')}`)
      return s
    })
  }
  const limit = o.limit === undefined ? 100 : checkInteger(o.limit, 'options.limit', 1, 10_000)
  const after = o.after === undefined ? null : checkJobIdRef(o.after, 'options.after')
  return [queue, states, limit, after]
}

export async function getJobs(execute: Execute, schema: string, params: unknown[]): Promise<JobRow[]> {
  return execute<JobRow>(sqlFor('get-jobs', schema), params)
}

/** Pauses or resumes the queue; returns whether it is paused now. */
export async function setPaused(execute: Execute, schema: string, queue: string, paused: boolean): Promise<boolean> {
  const [row] = await execute<{ paused: boolean }>(sqlFor('set-queue-paused', schema), [queue, paused])
  return row?.paused ?? paused
}

export interface QueueSettings {
  paused: boolean
  completedRetentionMs: number
  failedRetentionMs: number
  maxCompleted: number | null
}

export async function getSettings(execute: Execute, schema: string, queue: string): Promise<QueueSettings> {
  type Row = {
    paused: boolean
    completed_retention_ms: string
    failed_retention_ms: string
    max_completed: number | null
  }
  const [row] = await execute<Row>(sqlFor('get-queue-settings', schema), [queue])
  const r = row as Row
  return {
    paused: r.paused,
    completedRetentionMs: Number(r.completed_retention_ms),
    failedRetentionMs: Number(r.failed_retention_ms),
    maxCompleted: r.max_completed,
  }
}

/** Checks setRetention's settings (before any I/O) and returns the statement's parameters. */
export function retentionParams(queue: string, settings: unknown): unknown[] {
  if (settings === undefined) fail('REQUIRED', 'settings', 'is required')
  const o = checkOptions<RetentionSettings>(settings, 'settings', RETENTION_KEYS)
  const value = (key: keyof RetentionSettings, max: number): number | null => {
    const v = o[key]
    return v === undefined || v === null ? null : checkInteger(v, `settings.${key}`, 0, max)
  }
  return [
    queue,
    value('completedMs', MAX_DURATION_MS),
    value('failedMs', MAX_DURATION_MS),
    value('maxCompleted', 2_147_483_647),
    'completedMs' in o,
    'failedMs' in o,
    'maxCompleted' in o,
  ]
}

export async function setRetention(execute: Execute, schema: string, params: unknown[]): Promise<void> {
  await execute(sqlFor('set-retention', schema), params)
}
