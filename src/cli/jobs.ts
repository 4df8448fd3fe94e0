// `pgonce jobs list|show|retry|promote|cancel|remove`: one queue's jobs, through the Queue API.

import type { Command } from 'commander'
import { type Job, JOB_STATES, type JobState } from '../job.js'
import type { Queue } from '../queue.js'
import { RemoveJobError } from '../queue-control.js'
import { PromoteJobError } from '../promote-job.js'
import { type RetryJobCode, RetryJobError } from '../retry-job.js'
import { jsonOption, parseInteger, parseJobId, parseStates, queueOption } from './args.js'
import { itemCommand, withDb } from './connect.js'
import { emit, failure, keyValues, table } from './output.js'

/** A job as `--json` prints it: the fields of `Job`, in this order. */
export function jobJson(job: Job) {
  return {
    id: job.id,
    queue: job.queue,
    name: job.name,
    jobId: job.jobId,
    state: job.state,
    data: job.data,
    priority: job.priority,
    attempts: job.attempts,
    maxAttempts: job.maxAttempts,
    backoff: job.backoff,
    deduplicationId: job.deduplicationId,
    runAt: job.runAt,
    createdAt: job.createdAt,
    startedAt: job.startedAt,
    finishedAt: job.finishedAt,
    cancelRequestedAt: job.cancelRequestedAt,
    progress: job.progress,
    result: job.result,
    failedReason: job.failedReason,
    stacktrace: job.stacktrace,
  }
}

/** What a retry did; `code` and `message` say why one was refused (nothing changed then). */
export interface RetryResult {
  id: string
  retried: boolean
  code: RetryJobCode | null
  message: string | null
}

export async function retryOne(queue: Queue, id: string): Promise<RetryResult> {
  try {
    await queue.retryJob(id)
    return { id, retried: true, code: null, message: null }
  } catch (err) {
    if (!(err instanceof RetryJobError)) throw err
    return { id, retried: false, code: err.code, message: err.message }
  }
}

const CANCELLED: Record<string, string> = {
  cancelled: 'cancelled',
  'cancel-requested': 'cancel requested: its handler is running and is asked to stop; the job ends cancelled',
  'already-finished': 'already finished, nothing changed',
}

interface ListOpts {
  queue: string
  json?: boolean
  state?: JobState[]
  limit: number
  after?: string
}

export function registerJobs(program: Command): void {
  const jobs = program.command('jobs').description('list, show, retry, promote, cancel or remove the jobs of a queue')

  jobs
    .command('list')
    .description('a page of jobs, newest first')
    .addOption(queueOption())
    .option('--state <state...>', `only jobs in these states (${JOB_STATES.join(', ')})`, parseStates)
    .option('--limit <n>', 'at most this many (1 to 10000)', parseInteger(1, 10_000), 100)
    .option('--after <id>', 'the next page: jobs older than this id', parseJobId)
    .addOption(jsonOption())
    .action((opts: ListOpts, cmd: Command) =>
      withDb(cmd, async (db) => {
        const page = await db.queue(opts.queue).getJobs({
          limit: opts.limit,
          ...(opts.state && { states: opts.state }),
          ...(opts.after && { after: opts.after }),
        })
        const next = page.length === opts.limit ? (page.at(-1) as Job).id : null
        emit(opts.json, { jobs: page.map(jobJson), next }, () => {
          if (page.length === 0) return 'no jobs\n'
          const rows = page.map((j) => [j.id, j.name, j.state, `${j.attempts}/${j.maxAttempts}`, j.jobId, j.createdAt])
          return (
            table(['id', 'name', 'state', 'attempts', 'jobId', 'createdAt'], rows, [0]) +
            (next === null ? '' : `next page: --after ${next}\n`)
          )
        })
      }),
    )

  const ID = { name: 'id', description: 'the job id (job.id)', parse: parseJobId }
  const notFound = (id: string, queue: string) => failure(`job ${id} not found in queue ${queue}`)

  itemCommand(jobs, 'show', 'one job, every field', ID, async (queue, id, opts) => {
    const job = await queue.getJob(id)
    if (job === null) throw notFound(id, opts.queue)
    const fields = jobJson(job)
    emit(opts.json, fields, () => keyValues(Object.entries(fields)))
  })

  itemCommand(jobs, 'retry', 'give a failed job a fresh run', ID, async (queue, id, opts) => {
    const result = await retryOne(queue, id)
    if (!result.retried) throw failure(`${result.message} (${result.code})`)
    emit(opts.json, result, () => `job ${id}: retried\n`)
  })

  itemCommand(jobs, 'promote', 'make a delayed job due now', ID, async (queue, id, opts) => {
    await queue.promoteJob(id).catch((err: unknown) => {
      throw err instanceof PromoteJobError ? failure(`${err.message} (${err.code})`) : err
    })
    emit(opts.json, { id, promoted: true }, () => `job ${id}: promoted\n`)
  })

  itemCommand(jobs, 'cancel', 'cancel a pending job, or ask a running one to stop', ID, async (queue, id, opts) => {
    const outcome = await queue.cancelJob(id)
    if (outcome === 'not-found') throw notFound(id, opts.queue)
    emit(opts.json, { id, outcome }, () => `job ${id}: ${CANCELLED[outcome]}\n`)
  })

  itemCommand(jobs, 'remove', 'delete a pending or finished job (not a running one)', ID, async (queue, id, opts) => {
    const removed = await queue.removeJob(id).catch((err: unknown) => {
      throw err instanceof RemoveJobError ? failure(`${err.message} (${err.code})`) : err
    })
    if (!removed) throw notFound(id, opts.queue)
    emit(opts.json, { id, removed }, () => `job ${id}: removed\n`)
  })
}
