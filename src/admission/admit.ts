// Sends validated adds to the database: a plain one by sql/add-plain-job.sql, any other one through add_job(), a plain batch by sql/add-plain-jobs.sql, any other batch through _add_jobs().

import { prepared } from '../db/prepared.js'
import type { Execute } from '../db/executor.js'
import {
  type AdmissionRow,
  type AnswerRow,
  type PlainBulkRow,
  admissionFromAnswer,
  plainAdmissions,
} from './answers.js'
import { addJobParams, addJobsParams, addPlainJobParams, addPlainJobsParams } from './params.js'
import { type AddRequest, isPlain } from './request.js'

/** Where the add statements run: the caller's executor, for one queue of one schema. */
export interface AdmissionTarget {
  execute: Execute
  schema: string
  queue: string
  /** With the Redis layer on (docs/redis.md), how a keyed add is decided: src/cache/dedup-precheck.ts. */
  keyed?: KeyedAdmission
}

/** A keyed add through the Redis layer; `inPostgres` is the add as it is without Redis. */
export type KeyedAdmission = (
  t: AdmissionTarget,
  req: AddRequest,
  inPostgres: () => Promise<AdmissionRow>,
) => Promise<AdmissionRow>

/** One add: how it was decided and the job that answers. */
export function admitOne(t: AdmissionTarget, req: AddRequest): Promise<AdmissionRow> {
  if (t.keyed !== undefined && req.dedupId !== null) return t.keyed(t, req, () => admitInPostgres(t, req))
  return admitInPostgres(t, req)
}

/**
 * A plain add (nothing to decide) takes its own statement, which applies add_job()'s rules without its plpgsql layers
 * (measured in sql/add-plain-job.sql); every other add goes through add_job(), the function SQL callers use.
 */
async function admitInPostgres(t: AdmissionTarget, req: AddRequest): Promise<AdmissionRow> {
  const [row] = isPlain(req)
    ? await t.execute<AnswerRow>(prepared('add-plain-job', t.schema), addPlainJobParams(t.queue, req))
    : await t.execute<AnswerRow>(prepared('add-job', t.schema), addJobParams(t.queue, req))
  return admissionFromAnswer(row as AnswerRow, req, t.queue)
}

/** A batch's answer: every item's admission in input order, or the one rejected item (nothing was added). */
export type BatchAnswer =
  { rows: AdmissionRow[]; rejected: null } | { rows: null; rejected: { index: number; row: AdmissionRow } }

/**
 * A batch, all or nothing. Plain batches (the common bulk load) skip the per-item decisions and answer in one row.
 */
export async function admitMany(t: AdmissionTarget, reqs: readonly AddRequest[]): Promise<BatchAnswer> {
  if (reqs.length === 0) return { rows: [], rejected: null }
  if (reqs.every(isPlain)) {
    const [row] = await t.execute<PlainBulkRow>(prepared('add-plain-jobs', t.schema), addPlainJobsParams(t.queue, reqs))
    return { rows: plainAdmissions(row as PlainBulkRow, reqs, t.queue), rejected: null }
  }
  const answers = await t.execute<AnswerRow>(prepared('add-jobs', t.schema), addJobsParams(t.queue, reqs))
  const rows = answers.map((a) => admissionFromAnswer(a, reqs[(a.ordinal as number) - 1] as AddRequest, t.queue))
  const bad = answers.findIndex((a) => a.error !== null)
  if (bad >= 0)
    return { rows: null, rejected: { index: (answers[bad]?.ordinal as number) - 1, row: rows[bad] as AdmissionRow } }
  if (rows.length !== reqs.length)
    throw new Error(`pgonce: a batch of ${reqs.length} was answered with ${rows.length} rows`)
  return { rows, rejected: null }
}
