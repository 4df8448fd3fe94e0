// Turns the rows of sql/add-job.sql, sql/add-plain-job.sql, sql/add-jobs.sql and sql/add-plain-jobs.sql into job rows for the Job class.

import type { AddRequest } from './add-request.js'
import type { AddOutcome, JobRow, JobState } from './job.js'

/** A row of sql/add-job.sql: how the add was decided, and the job that answers as JSON text. */
export interface SingleRow {
  outcome: AddOutcome | null
  error: string | null
  job: string | null
}

/**
 * The row of sql/add-plain-job.sql: what the caller's request does not say about the job it added. A job handed to an
 * idle worker comes back active, with its first attempt counted and its lock; otherwise waiting.
 */
export interface PlainSingleRow {
  id: string | null
  state: JobState
  attempts: number
  lock_token: string | null
  locked_until_ms: number | null
  created_at_ms: number
}

export type AdmissionRow = JobRow & { outcome: AddOutcome | null; error: string | null; ordinal?: number }

/** A row of sql/add-jobs.sql: a job the batch inserted comes back as id, state and times only. */
export interface BulkRow {
  ordinal: number
  outcome: AddOutcome | null
  error: string | null
  id: string | null
  state: JobState | null
  run_at_ms: number | null
  created_at_ms: number | null
  job: string | null
}

/** The one row of sql/add-plain-jobs.sql: the new ids in input order, comma-separated, and now() in ms (every job's created_at). */
export interface PlainBulkRow {
  ids: string
  now_ms: number
}

const dateOrNull = (v: unknown) => (typeof v === 'string' ? new Date(v) : null)

/** A job row sent as JSON text (sql/add-job.sql, sql/add-jobs.sql), with its timestamps revived. */
export function jobRowFromJson(text: string, outcome: AddOutcome | null, error: string | null, ordinal?: number): AdmissionRow {
  const j = JSON.parse(text) as Record<string, unknown>
  j.outcome = outcome
  j.error = error
  j.ordinal = ordinal
  j.run_at = new Date(j.run_at as string)
  j.created_at = new Date(j.created_at as string)
  j.locked_until = dateOrNull(j.locked_until)
  j.finished_at = dateOrNull(j.finished_at)
  return j as unknown as AdmissionRow
}

/** A rejection without an owner row (DEPENDENCY_NOT_FOUND). */
export function ownerless(error: string | null): AdmissionRow {
  return { error, outcome: null, id: null } as unknown as AdmissionRow
}

/**
 * The row of a job this call inserted, completed from the caller's own request.
 * No object spread here: spreading into a large literal cost ~30 µs per item on Node 20, more than the INSERT.
 */
function insertedRow(req: AddRequest, queue: string, id: string, state: JobState, runAtMs: number, createdAtMs: number,
  data: unknown, outcome: AddOutcome | null, ordinal: number | undefined): AdmissionRow {
  return {
    outcome, error: null, ordinal,
    id, queue, name: req.name, job_id: req.jobId, data,
    state, priority: req.priority ?? 0, run_at: new Date(runAtMs),
    attempts: 0, max_attempts: req.attempts ?? 1, backoff: req.backoff, dedup_key: req.dedupId, lock_token: null,
    locked_until: null, last_error: null, error_stack: null, created_at: new Date(createdAtMs),
    finished_at: null,
  }
}

/** The admission of one plain add: the job it added, completed from the request. */
export function plainAdmission(row: PlainSingleRow, req: AddRequest, queue: string): AdmissionRow {
  // A job without jobId always comes back inserted; anything else is a broken schema, not an answer to build a job from.
  if (row.id === null) throw new Error('pgonce: sql/add-plain-job.sql answered without a job id')
  // Number(): an application may have told pg to parse float8 as text.
  const now = Number(row.created_at_ms)
  const job = insertedRow(req, queue, row.id, row.state, now, now, JSON.parse(req.dataJson) as unknown, 'added', undefined)
  job.attempts = Number(row.attempts)
  job.lock_token = row.lock_token
  job.locked_until = row.locked_until_ms === null ? null : new Date(Number(row.locked_until_ms))
  return job
}

/**
 * The admission of one bulk item as a full row: parsed from JSON, or, for a job this batch inserted, completed
 * from the caller's own request.
 */
export function bulkAdmission(b: BulkRow, req: AddRequest, queue: string): AdmissionRow {
  if (b.job !== null) return jobRowFromJson(b.job, b.outcome, b.error, b.ordinal)
  if (b.error !== null) return ownerless(b.error)
  return insertedRow(req, queue, b.id as string, b.state as JobState, b.run_at_ms as number, b.created_at_ms as number,
    JSON.parse(req.dataJson) as unknown, b.outcome, b.ordinal)
}

/**
 * The rows of a batch add_plain_jobs() inserted, in input order, from its one answer and the requests:
 * state 'delayed' when delayed, else 'waiting'; run_at = created_at + delay (as the function computes it).
 * `itemsJson` is the text sent (parsed once for every item's stored data, rather than once per item).
 */
export function plainAdmissions(b: PlainBulkRow, reqs: readonly AddRequest[], queue: string, itemsJson: string): AdmissionRow[] {
  const ids = b.ids.split(',')
  if (reqs.length === 0 || ids.length !== reqs.length) {
    throw new Error(`pgonce: add_plain_jobs() answered ${b.ids === '' ? 0 : ids.length} ids for ${reqs.length} items`)
  }
  const items = JSON.parse(itemsJson) as { data: unknown }[]
  // Number(): an application may have told pg to parse float8 as text.
  const now = Number(b.now_ms)
  const rows: AdmissionRow[] = new Array(reqs.length)
  for (let i = 0; i < reqs.length; i++) {
    const req = reqs[i] as AddRequest
    const delay = req.delayMs ?? 0
    rows[i] = insertedRow(req, queue, ids[i] as string, delay > 0 ? 'delayed' : 'waiting', now + delay, now,
      (items[i] as { data: unknown }).data, 'added', i + 1)
  }
  return rows
}
