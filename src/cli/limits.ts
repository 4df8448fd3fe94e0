// `pgonce limits get QUEUE` and `pgonce limits set QUEUE [--concurrency N|none] [--rate MAX/MS|none]
// [--group-concurrency N|none] [--group-rate MAX/MS|none]`: a queue's flow-control limits (docs/flow-control.md), stored in Postgres and obeyed by every worker's claim.

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
  const g = l.group
  if (g !== null && g.concurrency !== null)
    parts.push(`group concurrency ${g.concurrency} (${g.slotsInUse} in use, all groups)`)
  if (g !== null && g.rateLimit !== null)
    parts.push(`group rate limit ${g.rateLimit.max} per ${g.rateLimit.durationMs} ms`)
  return `queue ${queue}: ${parts.length === 0 ? 'no limits' : parts.join(', ')}\n`
}

export function registerLimits(program: Command): void {
  const limits = program
    .command('limits')
    .description("show or set a queue's limits (concurrency, rate limit, per group)")
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
    .option('--group-concurrency <n>', 'jobs of each group active at once, or none', parseConcurrency)
    .option('--group-rate <max/ms>', 'at most MAX starts of each group in any MS milliseconds, or none', parseRate)
    .addOption(jsonOption())
    .action((queue: string, opts: SetOptions, cmd: Command) => {
      // A usage error before any connection.
      if (Object.values(pick(opts)).every((v) => v === undefined))
        throw usage('give --concurrency, --rate, --group-concurrency or --group-rate')
      return withDb(cmd, async (db) => {
        const q = db.queue(queue)
        const p = pick(opts)
        const group = {
          ...(p.groupConcurrency === undefined ? {} : { concurrency: p.groupConcurrency }),
          ...(p.groupRate === undefined ? {} : { rateLimit: p.groupRate }),
        }
        await q.setLimits({
          ...(p.concurrency === undefined ? {} : { concurrency: p.concurrency }),
          ...(p.rate === undefined ? {} : { rateLimit: p.rate }),
          ...(Object.keys(group).length === 0 ? {} : { group }),
        })
        const l = await q.getLimits()
        emit(opts.json, { queue, ...l }, () => describeLimits(queue, l))
      })
    })
}

interface SetOptions {
  json?: boolean
  concurrency?: number | None
  rate?: RateLimit | None
  groupConcurrency?: number | None
  groupRate?: RateLimit | None
}

/** The limits given, `none` as null (cleared); undefined: not given (kept). */
function pick(o: SetOptions) {
  const v = <T>(x: T | None | undefined): T | null | undefined => (x === 'none' ? null : x)
  return {
    concurrency: v(o.concurrency),
    rate: v(o.rate),
    groupConcurrency: v(o.groupConcurrency),
    groupRate: v(o.groupRate),
  }
}
