// Moves key owners along for the admission property test: claim, complete, fail, cancel, finish by hand, key expiry and
// removal, a row deleted by hand.
//
// Completing and failing run pgonce's own statements (sql/complete-jobs.sql, sql/fail-job.sql), so that what
// follows a job's end is pgonce's logic, not the test's; their parameters are known here and nowhere else in the tests
// that use this file. A claim is a raw UPDATE that does to the row what sql/claim-jobs.sql does to the jobs it claims
// (no worker runs, so nothing else ever claims; claim-jobs.sql itself only takes due jobs in fetch order, and the test
// must pick one, due or not). A cancel and a finish by hand are raw UPDATEs too: the jobs_finished trigger releases the
// key and promotes or fails the dependents, as it does for any end.

import type pg from 'pg'
import { sqlFor } from '../../src/db/sql-files.js'

export interface OwnerDb {
  pool: pg.Pool
  schema: string
}

/** The lease the test's claims take: far longer than a run. */
const LEASE_MS = 600_000

/**
 * A claim of one waiting or delayed job (due or not), as sql/claim-jobs.sql claims: active with its attempt counted and
 * started_at set, a fresh lock token, a lease, locked_by. Returns the lock token.
 */
export async function claimJob(db: OwnerDb, id: string): Promise<string> {
  const { rows } = await db.pool.query<{ lock_token: string }>(
    `update "${db.schema}".jobs
     set state = 'active', lock_token = gen_random_uuid(),
         locked_until = now() + make_interval(secs => $2::bigint / 1000.0), locked_by = 'admission-property',
         attempts = attempts + 1, started_at = now()
     where id = $1 and state in ('waiting', 'delayed')
     returning lock_token::text`,
    [id, LEASE_MS],
  )
  const row = rows[0]
  if (row === undefined) throw new Error(`job ${id} is not waiting or delayed: it cannot be claimed`)
  return row.lock_token
}

interface StepRow {
  token: string
  state: string
  attempts: number
}

/** sql/complete-jobs.sql ($1 ids, $2 tokens, $3 results as JSON text) completing one active job: its row ({ state: 'completed', … }), or null if the token did not match. */
export async function completeJob(db: OwnerDb, id: string, token: string): Promise<StepRow | null> {
  const { rows } = await db.pool.query<StepRow>(sqlFor('complete-jobs', db.schema), [[id], [token], [null]])
  return rows[0] ?? null
}

/**
 * sql/fail-job.sql for one job: $1 id, $2 token, $3 message, $4 stack, $5 backoff ms (0: back at once).
 * Returns the state it left the job in ('failed' after its last attempt, else 'waiting'), null if the token did not match.
 */
export async function failJob(db: OwnerDb, id: string, token: string, message: string): Promise<string | null> {
  const { rows } = await db.pool.query<{ state: string }>(sqlFor('fail-job', db.schema), [id, token, message, null, 0])
  return rows[0]?.state ?? null
}

/** Backdates a TTL key so that it expired a second ago, by the database clock (a key without TTL is left alone). */
export async function expireKey(db: OwnerDb, queue: string, key: string): Promise<void> {
  await db.pool.query(
    `update "${db.schema}".dedup_keys set expires_at = now() - interval '1 second'
     where queue = $1 and key = $2 and expires_at is not null`,
    [queue, key],
  )
}

/** queue.removeDeduplicationKey(key): true if a held key was removed. */
export function removeKey(
  queue: { removeDeduplicationKey(key: string): Promise<boolean> },
  key: string,
): Promise<boolean> {
  return queue.removeDeduplicationKey(key)
}

/** job.removeDeduplicationKey() on the job as read back by id: true if this generation owned the key and it was held. */
export async function removeOwnKey(
  queue: { getJob(id: string): Promise<{ removeDeduplicationKey(): Promise<boolean> } | null> },
  id: string,
): Promise<boolean> {
  const job = await queue.getJob(id)
  if (job === null) throw new Error(`job ${id} does not exist`)
  return job.removeDeduplicationKey()
}

/**
 * Ends a live job by hand (an operator's UPDATE, bypassing sql/complete-jobs.sql and sql/fail-job.sql): completed, failed,
 * or cancelled (what queue.cancelJob does to a pending job). The lease goes; the jobs_finished trigger does the rest.
 * False if the job was not live.
 */
export async function finishJobByHand(
  db: OwnerDb,
  id: string,
  state: 'completed' | 'failed' | 'cancelled',
): Promise<boolean> {
  const { rowCount } = await db.pool.query(
    `update "${db.schema}".jobs set state = $2, finished_at = now(), lock_token = null, locked_until = null
     where id = $1 and state in ('waiting', 'delayed', 'waiting-children', 'active')`,
    [id, state],
  )
  return rowCount === 1
}

/** Deletes a job row by hand, as an operator might: its key rows and dependency edges go with it (foreign keys). */
export async function deleteJobRow(db: OwnerDb, id: string): Promise<void> {
  await db.pool.query(`delete from "${db.schema}".jobs where id = $1`, [id])
}
