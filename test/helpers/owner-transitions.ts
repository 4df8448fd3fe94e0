// Moves key owners along for the admission property test: claim, complete, fail, key expiry and removal, a row deleted by hand.
//
// Completion and failure run pgonce's own statements (sql/complete-jobs.sql, sql/fail-job.sql), so that a key's
// release is pgonce's logic, not the test's; their parameters are known here and nowhere else in the tests that use
// this file. A claim is a raw UPDATE that does to the row what sql/claim-due-jobs.sql does (no worker runs, so nothing
// else ever claims).

import type pg from 'pg'
import { sqlFor } from '../../src/db/sql-files.js'

export interface OwnerDb {
  pool: pg.Pool
  schema: string
}

/** A claim of one waiting or delayed job (due or not): active, a random lock token, a lease ahead, the attempt counted. */
export async function claimJob(db: OwnerDb, id: string): Promise<string> {
  const { rows } = await db.pool.query<{ lock_token: string }>(
    `update "${db.schema}".jobs
     set state = 'active', lock_token = gen_random_uuid(), locked_until = now() + interval '10 minutes',
         locked_by = 'admission-property', attempts = attempts + 1, started_at = now()
     where id = $1 and state in ('waiting', 'delayed')
     returning lock_token::text`, [id])
  const row = rows[0]
  if (row === undefined) throw new Error(`job ${id} is not waiting or delayed: it cannot be claimed`)
  return row.lock_token
}

/** sql/complete-jobs.sql for one job: $1 ids, $2 tokens, $3 results (JSON text), $4 'active'. True if it completed. */
export async function completeJob(db: OwnerDb, id: string, token: string): Promise<boolean> {
  const { rows } = await db.pool.query(sqlFor('complete-jobs', db.schema), [[id], [token], [null], 'active'])
  return rows.length === 1
}

/**
 * sql/fail-job.sql for one job: $1 id, $2 token, $3 message, $4 stack, $5 backoff ms (0: back at once), $6 'active'.
 * Returns the state it left the job in ('failed' after its last attempt, else 'waiting'), null if the token did not match.
 */
export async function failJob(db: OwnerDb, id: string, token: string): Promise<string | null> {
  const { rows } = await db.pool.query<{ state: string }>(
    sqlFor('fail-job', db.schema), [id, token, 'admission-property failure', null, 0, 'active'])
  return rows[0]?.state ?? null
}

/** Backdates a TTL key so that it expired a second ago, by the database clock (a key without TTL is left alone). */
export async function expireKey(db: OwnerDb, queue: string, key: string): Promise<void> {
  await db.pool.query(
    `update "${db.schema}".dedup_keys set expires_at = now() - interval '1 second'
     where queue = $1 and key = $2 and expires_at is not null`, [queue, key])
}

/** queue.removeDeduplicationKey(key): true if a held key was removed. */
export function removeKey(queue: { removeDeduplicationKey(key: string): Promise<boolean> }, key: string): Promise<boolean> {
  return queue.removeDeduplicationKey(key)
}

/** job.removeDeduplicationKey() on the job as read back by id: true if this generation owned the key's row. */
export async function removeOwnKey(
  queue: { getJob(id: string): Promise<{ removeDeduplicationKey(): Promise<boolean> } | null> }, id: string): Promise<boolean> {
  const job = await queue.getJob(id)
  if (job === null) throw new Error(`job ${id} does not exist`)
  return job.removeDeduplicationKey()
}

/**
 * Marks a job completed or failed by hand (an operator's UPDATE), bypassing sql/complete-jobs.sql and sql/fail-job.sql:
 * its key is not released and its dependents are not promoted. The only way to reach DESIGN.md §2.2's "no-TTL owner
 * terminal" cell, since pgonce's own statements release such a key in the same statement.
 */
export async function finishJobByHand(db: OwnerDb, id: string, state: 'completed' | 'failed'): Promise<void> {
  await db.pool.query(
    `update "${db.schema}".jobs set state = $2, finished_at = now(), lock_token = null, locked_until = null where id = $1`, [id, state])
}

/** Deletes a job row by hand, as an operator might: its key, if any, is left an orphan. */
export async function deleteJobRow(db: OwnerDb, id: string): Promise<void> {
  await db.pool.query(`delete from "${db.schema}".jobs where id = $1`, [id])
}
