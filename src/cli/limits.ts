// `pgonce limits get QUEUE` and `pgonce limits set QUEUE [--concurrency N|none] [--rate MAX/MS|none]`: a queue's
// flow-control limits (docs/flow-control.md), stored in Postgres and obeyed by every worker's claim.

import { type Command, InvalidArgumentError } from 'commander'
import type { QueueLimits, RateLimit } from '../limits.js'
import { MAX_LIMIT } from '../limits.js'
import { MAX_DURATION_MS } from '../validate.js'
import { jsonOption, parseQueue } from './args.js'
import { withDb } from './connect.js'
import { emit, usage } from './output.js'

/** `none` stays a string here (commander would take a null from a parser for "no value"); setLimits gets null. */
type None = 'none'

function parseConcurrency(value: string): number | None {
  if (value === 'none') return value
  const n = Number(value)
  if (!/^\d+$/.test(value) || n < 1 || n > MAX_LIMIT)
    throw new InvalidArgumentError(`must be a whole number from 1 to ${MAX_LIMIT}, or none`)
  return n
}

function parseRate(value: string): RateLimit | None {
  if (value === 'none') return value
  const m = /^(\d+)\/(\d+)(ms)?$/.exec(value)
  const max = Number(m?.[1])
  const durationMs = Number(m?.[2])
  if (m === null || max < 1 || max > MAX_LIMIT || durationMs < 1 || durationMs > MAX_DURATION_MS)
    throw new InvalidArgumentError(
      `must be MAX/MS (e.g. 10/1000: 10 starts per second, MAX 1 to ${MAX_LIMIT}), or none`,
    )
  return { max, durationMs }
}

/** One line: a queue's limits and the slots in use. */
export function describeLimits(queue: string, l: QueueLimits): string {
  const parts: string[] = []
  if (l.concurrency !== null) parts.push(`concurrency ${l.concurrency} (${l.slotsInUse} in use)`)
  if (l.rateLimit !== null) parts.push(`rate limit ${l.rateLimit.max} per ${l.rateLimit.durationMs} ms`)
  return `queue ${queue}: ${parts.length === 0 ? 'no limits' : parts.join(', ')}\n`
}

export function registerLimits(program: Command): void {
  const limits = program.command('limits').description("show or set a queue's limits (concurrency, rate limit)")
  limits
    .command('get')
    .description("a queue's limits and the concurrency slots in use")
    .argument('<queue>', 'the queue', parseQueue)
    .addOption(jsonOption())
    .action((queue: string, opts: { json?: boolean }, cmd: Command) =>
      withDb(cmd, async (db) => {
        const l = await db.queue(queue).getLimits()
        emit(opts.json, { queue, ...l }, () => describeLimits(queue, l))
      }),
    )
  limits
    .command('set')
    .description("set a queue's limits; a limit not given is kept, none clears it")
    .argument('<queue>', 'the queue', parseQueue)
    .option('--concurrency <n>', 'jobs active at once across all workers, or none', parseConcurrency)
    .option('--rate <max/ms>', 'at most MAX starts in any MS milliseconds, or none', parseRate)
    .addOption(jsonOption())
    .action(
      (queue: string, opts: { json?: boolean; concurrency?: number | None; rate?: RateLimit | None }, cmd: Command) => {
        // A usage error before any connection.
        if (opts.concurrency === undefined && opts.rate === undefined) throw usage('give --concurrency, --rate or both')
        return withDb(cmd, async (db) => {
          const q = db.queue(queue)
          await q.setLimits({
            ...(opts.concurrency === undefined
              ? {}
              : { concurrency: opts.concurrency === 'none' ? null : opts.concurrency }),
            ...(opts.rate === undefined ? {} : { rateLimit: opts.rate === 'none' ? null : opts.rate }),
          })
          const l = await q.getLimits()
          emit(opts.json, { queue, ...l }, () => describeLimits(queue, l))
        })
      },
    )
}
