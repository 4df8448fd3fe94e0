// GET api/queues: every queue with its counts, last hour's throughput, paused flag and retention.

import type { DashboardDb } from './db.js'

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

async function throughput(db: DashboardDb, queue: string) {
  const rows = await db.query<{ minutes_ago: number; state: string; jobs: number }>('dashboard-throughput', [queue])
  const perMinute = new Array<number>(60).fill(0)
  let completedLastHour = 0
  let failedLastHour = 0
  for (const r of rows) {
    if (r.state === 'completed') {
      completedLastHour += r.jobs
      const i = 59 - r.minutes_ago
      if (i >= 0 && i < 60) perMinute[i] = (perMinute[i] ?? 0) + r.jobs
    } else failedLastHour += r.jobs
  }
  return { completedLastHour, failedLastHour, perMinute }
}

interface SettingsRow {
  queue: string
  paused: boolean
  completed_retention_ms: string
  failed_retention_ms: string
  max_completed: number | null
}

export async function listQueues(db: DashboardDb) {
  const names = await knownQueues(db)
  const settings = await db.query<SettingsRow>('dashboard-queues', [names])
  const queues = []
  // One queue after another: the pool is small, and each queue's statements are index probes.
  for (const s of settings) {
    const c = await counts(db, s.queue)
    queues.push({
      name: s.queue,
      paused: s.paused,
      counts: c.counts,
      countsEstimated: c.estimated,
      throughput: await throughput(db, s.queue),
      retention: {
        completedMs: Number(s.completed_retention_ms),
        failedMs: Number(s.failed_retention_ms),
        maxCompleted: s.max_completed,
      },
      limits: null,
    })
  }
  return { queues }
}
