// Waiting out the cache listeners' lease after a commit that ended cached facts Redis was not told of (docs/redis.md): what makes such a change true for every process once pgonce reports it.

import { type AnswerRow, admissionFromAnswer } from '../admission/answers.js'
import type { KeyedAdmission } from '../admission/admit.js'
import { addJobParams } from '../admission/params.js'
import type { Execute } from '../db/executor.js'
import { prepared } from '../db/prepared.js'
import { sqlFor } from '../db/sql-files.js'
import { localNow } from './db-clock.js'

/** The column pgonce's statements that may end a cached fact answer with: how long to wait after their commit. */
export interface SettleRow {
  cache_settle_ms: number | null
}

/** A statement's `cache_settle_ms`, 0 when it has none. */
export function settleOf(rows: readonly SettleRow[]): number {
  return Number(rows[0]?.cache_settle_ms ?? 0)
}

/**
 * Waits at least `ms` by the monotonic clock. A timer alone may fire early: Node starts it from the time its event
 * loop cached at the start of the current turn, which a busy turn leaves behind.
 */
export async function settle(ms: number): Promise<void> {
  if (!(ms > 0)) return
  const until = localNow() + ms
  for (let left = ms; left > 0; left = until - localNow()) await new Promise((r) => setTimeout(r, Math.ceil(left)))
}

/**
 * After a commit that may have ended cached facts where the statement could not say (a batch): the settle interval
 * while any cache listener's lease lasts, read after the commit (sql/cache-settle.sql).
 */
export async function settleAfterCommit(execute: Execute, schema: string): Promise<number> {
  return settleOf(await execute<SettleRow>(sqlFor('cache-settle', schema), []))
}

/**
 * How a Queue without `redis` decides a keyed add outside a caller's transaction: an extend or a replace, which may
 * end the key's cached fact, through sql/add-job-ending.sql, answered only once every cache has heard the end; any
 * other add as it is.
 */
export const settledEndingAdmission: KeyedAdmission = async (t, req, inPostgres) => {
  if (!req.extend && !req.replace) return inPostgres()
  const [row] = await t.execute<AnswerRow & SettleRow>(prepared('add-job-ending', t.schema), addJobParams(t.queue, req))
  const answer = row as AnswerRow & SettleRow
  await settle(settleOf([answer]))
  return admissionFromAnswer(answer, req, t.queue)
}
