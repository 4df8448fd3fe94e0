// `pgonce stats [--queue Q] [--watch]`: jobs per queue and state, held keys, paused; --watch redraws until Ctrl-C.

import type { Command } from 'commander'
import { ValidationError } from '../errors.js'
import { JOB_STATES, type JobState } from '../job.js'
import type { JobCounts } from '../queue.js'
import { type LimitsRow, type QueueLimits, type RateLimit, limitsOf } from '../limits.js'
import { jsonOption, parseInteger, parseQueue } from './args.js'
import { type Db, withDb } from './connect.js'
import { emit, table, time } from './output.js'

export interface QueueStats {
  queue: string
  /** null: a queue whose name the Queue API refuses (added by SQL), so its setting is not read. */
  paused: boolean | null
  counts: JobCounts
  heldKeys: number
  /** Its limits (docs/flow-control.md) and the slots in use; null: none. */
  limits: QueueLimits | null
}

function zeroCounts(): JobCounts {
  return Object.fromEntries(JOB_STATES.map((s) => [s, 0])) as JobCounts
}

async function pausedOf(db: Db, queue: string): Promise<boolean | null> {
  try {
    return await db.queue(queue).isPaused()
  } catch (err) {
    if (err instanceof ValidationError) return null
    throw err
  }
}

/** One queue through the Queue API; all queues (those with jobs or held keys) from the views. */
export async function readStats(db: Db, queue: string | undefined): Promise<QueueStats[]> {
  const held = await db.query<{ queue: string; n: number }>(
    'select queue, count(*)::integer as n from :PGONCE_SCHEMA.held_keys where ($1::text is null or queue = $1) group by queue',
    [queue ?? null],
  )
  const counts = new Map<string, JobCounts>()
  if (queue !== undefined) {
    counts.set(queue, await db.queue(queue).getJobCounts())
  } else {
    const rows = await db.query<{ queue: string; state: JobState; n: number }>(
      'select queue, state, jobs::integer as n from :PGONCE_SCHEMA.job_counts',
      [],
    )
    for (const r of rows) {
      const c = counts.get(r.queue) ?? zeroCounts()
      c[r.state] += r.n
      counts.set(r.queue, c)
    }
  }
  const heldBy = new Map(held.map((r) => [r.queue, r.n]))
  const limits = await readLimits(db, queue)
  const names = [...new Set([...counts.keys(), ...heldBy.keys()])].sort()
  return Promise.all(
    names.map(async (name) => ({
      queue: name,
      paused: await pausedOf(db, name),
      counts: counts.get(name) ?? zeroCounts(),
      heldKeys: heldBy.get(name) ?? 0,
      limits: limits.get(name) ?? null,
    })),
  )
}

/** The limits of every queue that has one (the queue_limits view), or of `queue`. */
async function readLimits(db: Db, queue: string | undefined): Promise<Map<string, QueueLimits>> {
  const rows = await db.query<LimitsRow & { queue: string }>(
    `select queue, concurrency, rate_max, rate_duration_ms, slots_in_use, group_concurrency, group_rate_max,
       group_rate_duration_ms, group_slots_in_use
     from :PGONCE_SCHEMA.queue_limits where ($1::text is null or queue = $1)`,
    [queue ?? null],
  )
  return new Map(rows.map((r) => [r.queue, limitsOf(r)]))
}

const rateText = (r: RateLimit | null | undefined): string => (r ? `${r.max} per ${r.durationMs} ms` : '-')

function render(stats: QueueStats[]): string {
  if (stats.length === 0) return 'no jobs\n'
  const paused = (p: boolean | null) => (p === null ? '-' : p ? 'yes' : 'no')
  const counts = table(
    ['queue', 'paused', ...JOB_STATES, 'held-keys'],
    stats.map((s) => [s.queue, paused(s.paused), ...JOB_STATES.map((state) => s.counts[state]), s.heldKeys]),
    JOB_STATES.map((_, i) => i + 2).concat(JOB_STATES.length + 2),
  )
  const limited = stats.filter((s) => s.limits !== null)
  if (limited.length === 0) return counts
  const limits = table(
    ['queue', 'concurrency', 'in-use', 'rate-limit', 'group-concurrency', 'group-rate-limit'],
    limited.map(({ queue, limits: l }) => [
      queue,
      l?.concurrency ?? '-',
      l?.concurrency === null ? '-' : l?.slotsInUse,
      rateText(l?.rateLimit),
      l?.group?.concurrency ?? '-',
      rateText(l?.group?.rateLimit),
    ]),
    [1, 2, 4],
  )
  return `${counts}\nlimits:\n${limits}`
}

/** Draws every `intervalMs` until SIGINT or SIGTERM; each draw starts after the previous one ended. */
async function watch(draw: () => Promise<void>, intervalMs: number): Promise<void> {
  let stop = () => {}
  const stopped = new Promise<void>((resolve) => {
    stop = resolve
  })
  let done = false
  const onSignal = () => {
    done = true
    stop()
  }
  process.once('SIGINT', onSignal)
  process.once('SIGTERM', onSignal)
  try {
    while (!done) {
      await draw()
      let timer: NodeJS.Timeout | undefined
      await Promise.race([
        stopped,
        new Promise((resolve) => {
          timer = setTimeout(resolve, intervalMs)
        }),
      ])
      clearTimeout(timer)
    }
  } finally {
    process.off('SIGINT', onSignal)
    process.off('SIGTERM', onSignal)
  }
}

interface StatsOptions {
  queue?: string
  watch?: boolean
  interval: number
  json?: boolean
}

export function registerStats(program: Command): void {
  program
    .command('stats')
    .description('jobs per queue and state, held dedup keys, paused, limits')
    .option('--queue <name>', 'only this queue', parseQueue)
    .option('--watch', 'redraw until Ctrl-C')
    .option('--interval <ms>', 'with --watch: time between redraws', parseInteger(100, 3_600_000), 2000)
    .addOption(jsonOption())
    .action((opts: StatsOptions, cmd: Command) =>
      withDb(cmd, async (db) => {
        const draw = async () => {
          const queues = await readStats(db, opts.queue)
          emit(opts.json, { queues }, () => {
            if (opts.watch !== true) return render(queues)
            // A terminal is cleared for each redraw; a pipe gets one block per redraw.
            const clear = process.stdout.isTTY ? '\x1b[2J\x1b[H' : ''
            return `${clear}${time(new Date())}  every ${opts.interval / 1000} s, Ctrl-C to stop\n${render(queues)}\n`
          })
        }
        await (opts.watch === true ? watch(draw, opts.interval) : draw())
      }),
    )
}
