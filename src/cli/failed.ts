// `pgonce failed list|retry`: failed jobs across queues (the failed_jobs view), and retrying them with a report per job.

import type { Command } from 'commander'
import { jsonOption, parseInteger, parseJobIds, parseQueue, queueOption } from './args.js'
import { withDb } from './connect.js'
import { type RetryResult, retryOne } from './jobs.js'
import { brief, emit, failure, table } from './output.js'

interface FailedRow {
  id: string
  queue: string
  name: string
  job_id: string | null
  attempts: number
  max_attempts: number
  last_error: string | null
  finished_at: Date | null
  data: unknown
}

/** Page size while retrying every failed job of a queue. */
const RETRY_PAGE = 500

export function registerFailed(program: Command): void {
  const failed = program.command('failed').description('list failed jobs, or retry them')

  failed
    .command('list')
    .description('failed jobs, newest first')
    .option('--queue <name>', 'only this queue (Default: every queue)', parseQueue)
    .option('--limit <n>', 'at most this many (1 to 10000)', parseInteger(1, 10_000), 100)
    .addOption(jsonOption())
    .action((opts: { queue?: string; limit: number; json?: boolean }, cmd: Command) =>
      withDb(cmd, async (db) => {
        const rows = await db.query<FailedRow>(
          `select id, queue, name, job_id, attempts, max_attempts, last_error, finished_at, data from :PGONCE_SCHEMA.failed_jobs
         where ($1::text is null or queue = $1) order by id desc limit $2`,
          [opts.queue ?? null, opts.limit],
        )
        const jobs = rows.map((r) => ({
          id: r.id,
          queue: r.queue,
          name: r.name,
          jobId: r.job_id,
          attempts: r.attempts,
          maxAttempts: r.max_attempts,
          failedReason: r.last_error,
          finishedAt: r.finished_at,
          data: r.data,
        }))
        emit(opts.json, { jobs }, () =>
          jobs.length === 0
            ? 'no failed jobs\n'
            : table(
                ['id', 'queue', 'name', 'attempts', 'finishedAt', 'failedReason'],
                jobs.map((j) => [
                  j.id,
                  j.queue,
                  j.name,
                  `${j.attempts}/${j.maxAttempts}`,
                  j.finishedAt,
                  brief(j.failedReason),
                ]),
                [0],
              ),
        )
      }),
    )

  failed
    .command('retry')
    .description('retry failed jobs of a queue: the ids given, or every one; exit 1 if any was refused')
    .argument('[id...]', 'job ids (Default: every failed job of the queue)', parseJobIds)
    .addOption(queueOption())
    .addOption(jsonOption())
    .action((ids: string[] | undefined, opts: { queue: string; json?: boolean }, cmd: Command) =>
      withDb(cmd, async (db) => {
        const queue = db.queue(opts.queue)
        const results: RetryResult[] = []
        if (ids !== undefined && ids.length > 0) {
          for (const id of ids) results.push(await retryOne(queue, id))
        } else {
          // Newest first: of two failed generations of one jobId, the newer is retried and the older refused.
          for (let after: string | undefined; ;) {
            const page = await queue.getJobs({ states: ['failed'], limit: RETRY_PAGE, ...(after && { after }) })
            for (const job of page) results.push(await retryOne(queue, job.id))
            if (page.length < RETRY_PAGE) break
            after = page.at(-1)?.id
          }
        }
        const retried = results.filter((r) => r.retried).length
        emit(opts.json, { queue: opts.queue, results, retried, notRetried: results.length - retried }, () => {
          if (results.length === 0) return `no failed jobs in queue ${opts.queue}\n`
          const lines = results.map((r) => (r.retried ? `job ${r.id}: retried` : `${r.message} (${r.code})`))
          return `${lines.join('\n')}\nretried ${retried} of ${results.length}\n`
        })
        if (retried < results.length) throw failure(`${results.length - retried} of ${results.length} jobs not retried`)
      }),
    )
}
