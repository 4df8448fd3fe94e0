// GET api/queues: every queue with its counts, last hour's throughput, paused flag and retention.

import { type DashboardDb, POOL_SIZE } from './db.js'

const STATES = ['waiting', 'delayed', 'waiting-children', 'active', 'completed', 'failed', 'cancelled'] as const
type State = (typeof STATES)[number]

/**
 * Counts stop here: a count that reaches it is the planner's estimate instead (at least this much), so a queue of a
 * million completed jobs costs as much as one of ten thousand (docs/architecture.md, "The dashboard at scale").
 */
export const COUNT_CAP = 10_000

/** Every queue this schema has seen (loose scans of the partial indexes, sql/known-queues.sql). */
export async function knownQueues(db: DashboardDb): Promise<string[]> {
  return (await db.query<{ queue: string }>('known-queues', [])).map((r) => r.queue)
}

async function estimate(db: DashboardDb, queue: string, state: State): Promise<number> {
  const [row] = await db.query<{ 'QUERY PLAN': [{ Plan: { 'Plan Rows': number } }] }>('dashboard-count-estimate', [
    queue,
    state === 'waiting' ? 'waiting' : state,
  ])
  return Math.round(row?.['QUERY PLAN'][0].Plan['Plan Rows'] ?? 0)
}

async function counts(db: DashboardDb, queue: string) {
  const [row] = await db.query<Record<State, number>>('dashboard-queue-counts', [queue, COUNT_CAP])
  const exact = row as Record<State, number>
  const out = {} as Record<State, number>
  const estimated: State[] = []
  for (const s of STATES) {
    out[s] = exact[s]
    if (exact[s] >= COUNT_CAP) {
      estimated.push(s)
      out[s] = Math.max(COUNT_CAP, await estimate(db, queue, s))
    }
  }
  return { counts: out, estimated }
}

/**
 * Index entries read per minute and state for the throughput: a minute with more is extrapolated from the rate of the
 * newest ones read (docs/dashboard.md, "Performance").
 */
export const THROUGHPUT_SAMPLE = 500

async function throughput(db: DashboardDb, queue: string) {
  const rows = await db.query<{ minutes_ago: number; state: string; jobs: number; span_ms: number }>(
    'dashboard-throughput',
    [queue, THROUGHPUT_SAMPLE],
  )
  const perMinute = new Array<number>(60).fill(0)
  let completedLastHour = 0
  let failedLastHour = 0
  let estimated = false
  for (const r of rows) {
    let jobs = r.jobs
    if (jobs >= THROUGHPUT_SAMPLE) {
      // The newest THROUGHPUT_SAMPLE of the minute took span_ms: the same rate over the whole minute.
      jobs = Math.max(jobs, Math.round((jobs * 60_000) / Math.max(1, Number(r.span_ms))))
      estimated = true
    }
    if (r.state === 'completed') {
      completedLastHour += jobs
      const i = 59 - r.minutes_ago
      if (i >= 0 && i < 60) perMinute[i] = (perMinute[i] ?? 0) + jobs
    } else failedLastHour += jobs
  }
  return { completedLastHour, failedLastHour, perMinute, estimated }
}

interface SettingsRow {
  queue: string
  paused: boolean
  completed_retention_ms: string
  failed_retention_ms: string
  max_completed: number | null
}

interface LimitsRow {
  queue: string
  concurrency: number | null
  rate_max: number | null
  rate_duration_ms: string | null
  held_until: Date | null
  slots_in_use: number
  rate_used: number
  group_concurrency: number | null
  group_rate_max: number | null
  group_rate_duration_ms: string | null
  group_slots_in_use: number
}

/** A queue's flow-control limits as the API gives them (docs/flow-control.md); null: none. */
function limitsView(l: LimitsRow | undefined) {
  if (l === undefined) return null
  return {
    concurrency: l.concurrency,
    slotsInUse: l.slots_in_use,
    rateLimit: l.rate_max === null ? null : { max: l.rate_max, durationMs: Number(l.rate_duration_ms) },
    startsInWindow: l.rate_used,
    heldUntil: l.held_until?.toISOString() ?? null,
    group:
      l.group_concurrency === null && l.group_rate_max === null
        ? null
        : {
            concurrency: l.group_concurrency,
            rateLimit:
              l.group_rate_max === null
                ? null
                : { max: l.group_rate_max, durationMs: Number(l.group_rate_duration_ms) },
            slotsInUse: l.group_slots_in_use,
          },
  }
}

/** Queues read at once: the dashboard pool's size. */
const PARALLEL = POOL_SIZE

async function queueView(db: DashboardDb, s: SettingsRow, limits: LimitsRow | undefined) {
  const [c, t] = [await counts(db, s.queue), await throughput(db, s.queue)]
  return {
    name: s.queue,
    paused: s.paused,
    counts: c.counts,
    countsEstimated: c.estimated,
    throughput: t,
    retention: {
      completedMs: Number(s.completed_retention_ms),
      failedMs: Number(s.failed_retention_ms),
      maxCompleted: s.max_completed,
    },
    limits: limitsView(limits),
  }
}

export async function listQueues(db: DashboardDb) {
  const names = await knownQueues(db)
  const settings = await db.query<SettingsRow>('dashboard-queues', [names])
  const limits = new Map((await db.query<LimitsRow>('dashboard-queue-limits', [names])).map((l) => [l.queue, l]))
  const queues = []
  // A few queues at a time: as many as the pool's connections (more would wait for one, and a wait is bounded).
  for (let i = 0; i < settings.length; i += PARALLEL) {
    queues.push(
      ...(await Promise.all(settings.slice(i, i + PARALLEL).map((s) => queueView(db, s, limits.get(s.queue))))),
    )
  }
  return { queues }
}
