// Turns the answers of the add statements (the _answer() columns; sql/add-plain-jobs.sql's one row) into job rows, and rejections into errors.

import { DeduplicationError, ValidationError } from '../errors.js'
import type { AddRequest } from './request.js'
import type { AddOutcome, JobRow, JobState } from '../job.js'

/**
 * One row of the add statements (sql/add-job.sql, add-plain-job.sql, add-jobs.sql; `_answer()`): how an item was
 * decided, and the job.
 * A job this call inserted (added, replaced) comes as the columns the request does not say, comma-separated: id, state,
 * priority, max_attempts, run_at and created_at in ms (one text: every column of an answer costs about a µs per
 * statement); any other job whole, as JSON text.
 */
export interface AnswerRow {
  /** The item's place in a batch (sql/add-jobs.sql); a single add's statements leave it out. */
  ordinal?: number | null
  outcome: AddOutcome | null
  error: string | null
  job: string | null
}

/** The one row of sql/add-plain-jobs.sql. */
export interface PlainBulkRow {
  ids: string
  now_ms: number
  default_priority: number
  default_max_attempts: number
}

export type AdmissionRow = JobRow & { outcome: AddOutcome | null; error: string | null }

const dateOrNull = (v: unknown) => (typeof v === 'string' ? new Date(v) : null)

/** A job row sent as JSON text, with its timestamps revived. */
export function jobRowFromJson(text: string, outcome: AddOutcome | null, error: string | null): AdmissionRow {
  const j = JSON.parse(text) as Record<string, unknown>
  j.outcome = outcome
  j.error = error
  j.run_at = new Date(j.run_at as string)
  j.created_at = new Date(j.created_at as string)
  j.locked_until = dateOrNull(j.locked_until)
  j.started_at = dateOrNull(j.started_at)
  j.finished_at = dateOrNull(j.finished_at)
  j.cancel_requested_at = dateOrNull(j.cancel_requested_at)
  return j as unknown as AdmissionRow
}

/**
 * The row of a job this call inserted, from the caller's own request and what the server chose.
 * No object spread here: spreading into a large literal cost ~30 µs per item on Node 20, more than the INSERT.
 */
function insertedRow(
  req: AddRequest,
  queue: string,
  id: string,
  state: JobState,
  priority: number,
  maxAttempts: number,
  runAtMs: number,
  createdAtMs: number,
  data: unknown,
  outcome: AddOutcome | null,
): AdmissionRow {
  return {
    outcome,
    error: null,
    id,
    queue,
    name: req.name,
    job_id: req.jobId,
    data,
    state,
    priority,
    run_at: new Date(runAtMs),
    attempts: 0,
    max_attempts: maxAttempts,
    backoff: req.backoff,
    dedup_key: req.dedupId,
    lock_token: null,
    locked_until: null,
    last_error: null,
    error_stack: null,
    created_at: new Date(createdAtMs),
    started_at: null,
    finished_at: null,
    result: null,
    progress: null,
    cancel_requested_at: null,
    timeout_ms: req.timeoutMs,
  }
}

/** The admission of one item from its answer row. */
export function admissionFromAnswer(a: AnswerRow, req: AddRequest, queue: string): AdmissionRow {
  if (a.job === null) {
    // A rejection without an owner row (DEPENDENCY_NOT_FOUND); an answer with neither is a broken schema.
    if (a.error === null) throw new Error('pgonce: an add was answered without a job')
    return { error: a.error, outcome: null, id: null } as unknown as AdmissionRow
  }
  if (a.outcome !== 'added' && a.outcome !== 'replaced') return jobRowFromJson(a.job, a.outcome, a.error)
  const [id, state, priority, maxAttempts, runAtMs, createdAtMs] = a.job.split(',') as [
    string,
    JobState,
    string,
    string,
    string,
    string,
  ]
  return insertedRow(
    req,
    queue,
    id,
    state,
    Number(priority),
    Number(maxAttempts),
    Number(runAtMs),
    Number(createdAtMs),
    JSON.parse(req.dataJson) as unknown,
    a.outcome,
  )
}

/**
 * The rows of a plain batch, in input order, from its one answer: state 'delayed' when delayed, else 'waiting';
 * run_at = created_at + delay (as sql/add-plain-jobs.sql computes it); what an item left out, the server's defaults.
 */
export function plainAdmissions(b: PlainBulkRow, reqs: readonly AddRequest[], queue: string): AdmissionRow[] {
  const ids = b.ids.split(',')
  if (reqs.length === 0 || ids.length !== reqs.length) {
    throw new Error(
      `pgonce: sql/add-plain-jobs.sql answered ${b.ids === '' ? 0 : ids.length} ids for ${reqs.length} items`,
    )
  }
  const now = Number(b.now_ms)
  const rows = new Array<AdmissionRow>(reqs.length)
  for (let i = 0; i < reqs.length; i++) {
    const req = reqs[i] as AddRequest
    const delay = req.delayMs ?? 0
    rows[i] = insertedRow(
      req,
      queue,
      ids[i] as string,
      delay > 0 ? 'delayed' : 'waiting',
      req.priority ?? Number(b.default_priority),
      req.attempts ?? Number(b.default_max_attempts),
      now + delay,
      now,
      JSON.parse(req.dataJson) as unknown,
      'added',
    )
  }
  return rows
}

/**
 * Throws what a rejected admission means: DEPENDENCY_NOT_FOUND as a ValidationError naming `field`.dependsOn, the
 * strategies' rejections as a DeduplicationError carrying the key and its owner. An admitted row is returned as is.
 */
export function admittedOrThrow(
  row: AdmissionRow,
  req: AddRequest,
  field: string,
): AdmissionRow & { outcome: AddOutcome } {
  if (row.error === null) return row as AdmissionRow & { outcome: AddOutcome }
  const owner = row.id ?? null
  if (row.error === 'DEPENDENCY_NOT_FOUND') {
    throw new ValidationError('DEPENDENCY_NOT_FOUND', `${field}.dependsOn`, 'names a job that does not exist')
  }
  const key = req.dedupId ?? ''
  const message =
    row.error === 'EXTEND_NOT_PENDING'
      ? `Duplicate unique_key (extended TTL): key '${key}' is held by job ${owner}, which is no longer pending`
      : `cannot replace job ${owner} of key '${key}': a live job depends on it`
  throw new DeduplicationError(row.error as DeduplicationError['code'], key, owner, message)
}
