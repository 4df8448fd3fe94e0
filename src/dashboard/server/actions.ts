// The dashboard's actions, each through the Queue method a program would call (so the same rules and errors apply):
// retry, cancel, remove and promote a job; pause and resume a queue; remove a dedup key; run a scheduler now.

import { admittedOrThrow } from '../../admission/answers.js'
import { admitOne } from '../../admission/admit.js'
import { toAddRequest } from '../../admission/request.js'
import { executorFor } from '../../db/executor.js'
import { checkQueueName } from '../../db/identifiers.js'
import { sqlFor } from '../../db/sql-files.js'
import { PromoteJobError } from '../../promote-job.js'
import { RemoveJobError } from '../../queue-control.js'
import { RetryJobError } from '../../retry-job.js'
import { checkText } from '../../validate.js'
import type { DashboardDb } from './db.js'
import { ApiError, notFound } from './http-error.js'
import { checkId } from './job.js'
import { knownQueues } from './queues.js'
import { type SummaryRow, jobSummary } from './shapes.js'

export const JOB_ACTIONS = ['retry', 'cancel', 'remove', 'promote'] as const
export type JobAction = (typeof JOB_ACTIONS)[number]

/** The typed errors of the Queue methods: a state that does not allow the action is 409, a missing job 404. */
function typed(err: unknown): never {
  if (err instanceof RetryJobError || err instanceof PromoteJobError || err instanceof RemoveJobError) {
    throw new ApiError(err.code === 'NOT_FOUND' ? 'NOT_FOUND' : 'CONFLICT', err.message, err.code)
  }
  throw err
}

async function summary(db: DashboardDb, id: string) {
  const [row] = await db.query<SummaryRow>('dashboard-job', [id])
  return row === undefined ? null : jobSummary(row)
}

/** One job action; the job's queue comes from the database. */
export async function jobAction(db: DashboardDb, action: JobAction, idText: string) {
  const id = checkId(idText)
  const [found] = await db.query<{ queue: string }>('dashboard-job-queue', [id])
  if (found === undefined) throw notFound(`job ${id}`)
  const queue = db.queue(found.queue)
  try {
    switch (action) {
      case 'retry':
        await queue.retryJob(id)
        break
      case 'promote':
        await queue.promoteJob(id)
        break
      case 'cancel': {
        const outcome = await queue.cancelJob(id)
        if (outcome === 'not-found') throw notFound(`job ${id}`)
        if (outcome === 'already-finished') {
          throw new ApiError('CONFLICT', `job ${id} has finished already: nothing to cancel`, 'ALREADY_FINISHED')
        }
        break
      }
      case 'remove':
        if (!(await queue.removeJob(id))) throw notFound(`job ${id}`)
        return { ok: true, job: null }
    }
  } catch (err) {
    typed(err)
  }
  return { ok: true, job: await summary(db, id) }
}

/** Pause or resume a queue the schema knows (a typo must not pause a queue of its own). */
export async function queueAction(db: DashboardDb, action: 'pause' | 'resume', name: string) {
  const queue = checkQueueName(name, 'queue')
  if (!(await knownQueues(db)).includes(queue)) throw notFound(`queue ${queue}`)
  if (action === 'pause') await db.queue(queue).pause()
  else await db.queue(queue).resume()
  return { ok: true }
}

export async function removeKey(db: DashboardDb, queueName: string, keyText: string) {
  const queue = checkQueueName(queueName, 'queue')
  const key = checkText(keyText, 'key')
  return { ok: true, removed: await db.queue(queue).removeDeduplicationKey(key) }
}

interface LockedScheduler {
  id: string
  job_name: string
  job_data: unknown
  job_opts: Record<string, unknown>
  now_ms: number
}

/**
 * Adds scheduler `id`'s job now, as a tick would (its template, through add_job), with the jobId
 * `sched:<queue>:<id>:<now ms>`: a second click in the same millisecond is the same job. The scheduler row is locked
 * meanwhile, so a worker's tick of it waits; its next tick stays where it was, its last run becomes now.
 */
export async function runScheduler(db: DashboardDb, queueName: string, idText: string) {
  const queue = checkQueueName(queueName, 'queue')
  const id = checkText(idText, 'id')
  const client = await db.connect()
  let broken = false
  try {
    await client.query('begin')
    const execute = executorFor(client, 'client', false)
    const [s] = await execute<LockedScheduler>(sqlFor('dashboard-lock-scheduler', db.schema), [queue, id])
    if (s === undefined) throw notFound(`scheduler ${id} of queue ${queue}`)
    const nowMs = Number(s.now_ms)
    const req = toAddRequest(
      s.job_name,
      s.job_data,
      { ...s.job_opts, jobId: `sched:${queue}:${s.id}:${nowMs}` },
      'template',
      1 << 20,
    )
    const row = admittedOrThrow(await admitOne({ execute, schema: db.schema, queue }, req), req, 'template')
    await execute(sqlFor('dashboard-scheduler-ran', db.schema), [queue, id, nowMs])
    await client.query('commit')
    return { ok: true, jobId: String(row.id) }
  } catch (err) {
    await client.query('rollback').catch(() => (broken = true))
    throw err
  } finally {
    client.release(broken)
  }
}
