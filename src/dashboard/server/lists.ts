// GET api/keys, api/effects, api/schedulers and api/failed: the held dedup keys, the effects ledger and runOnce
// claims, the schedulers, and the failed set grouped by error.

import { checkQueueName } from '../../db/identifiers.js'
import { decodeCursor, encodeCursor } from './cursor.js'
import type { DashboardDb } from './db.js'
import { badRequest } from './http-error.js'
import { parseLimit, queuesOf } from './jobs.js'
import { knownQueues } from './queues.js'
import { iso } from './shapes.js'

/** Failed jobs read per queue for the grouping, newest first. */
export const FAILED_SAMPLE = 10_000
const MAX_SCHEDULERS = 1_000

/** `search`: an exact key, or a prefix when it ends with `*`. */
function keySearch(search: string | undefined): { exact: string | null; prefix: string | null } {
  if (search === undefined || search === '') return { exact: null, prefix: null }
  if (search.length > 1_000) throw badRequest('search: at most 1000 characters')
  if (search.endsWith('*') && search.length > 1) return { exact: null, prefix: search.slice(0, -1) }
  return { exact: search, prefix: null }
}

interface KeyRow {
  queue: string
  key: string
  owner_id: string
  owner_state: string
  owner_name: string
  expires_at: Date | null
  created_at: Date
  age_ms: number
}

export async function listKeys(
  db: DashboardDb,
  q: { queue?: string; search?: string; after?: string; limit?: string },
) {
  const queue = q.queue === undefined || q.queue === '' ? null : checkQueueName(q.queue, 'queue')
  const { exact, prefix } = keySearch(q.search)
  const limit = parseLimit(q.limit)
  const after = decodeCursor(q.after, 'keys', 2)
  // One key in every queue: a probe of the primary key per known queue, not a walk of every key.
  const probes = queue === null && exact !== null ? await knownQueues(db) : null
  const rows = await db.query<KeyRow>('dashboard-keys', [queue, exact, prefix, after, limit, probes])
  const last = rows.at(-1)
  return {
    keys: rows.map((r) => ({
      queue: r.queue,
      key: r.key,
      ownerId: r.owner_id,
      ownerState: r.owner_state,
      ownerName: r.owner_name,
      expiresAt: iso(r.expires_at),
      createdAt: r.created_at.toISOString(),
      ageMs: Number(r.age_ms),
    })),
    next: rows.length === limit && last !== undefined ? encodeCursor('keys', [last.queue, last.key]) : null,
  }
}

export async function listEffects(db: DashboardDb, q: { search?: string; after?: string; limit?: string }) {
  const { exact, prefix } = keySearch(q.search)
  const limit = parseLimit(q.limit)
  const after = decodeCursor(q.after, 'effects', 2)
  const rows = await db.query<{ key: string; recorded_at: Date; k1: string }>('dashboard-effects', [
    exact,
    prefix,
    after,
    limit,
  ])
  // The claims are few (running ones, and done markers until their doneTtl): the first page of them, by key.
  const claims = after !== null ? [] : await db.query<ClaimRow>('dashboard-claims', [exact, prefix, limit])
  const last = rows.at(-1)
  return {
    effects: rows.map((r) => ({ key: r.key, jobId: null, recordedAt: r.recorded_at.toISOString() })),
    claims: claims.map((c) => ({
      key: c.key,
      state: c.state,
      jobId: null,
      expiresAt: iso(c.expires_at),
      expired: c.expired,
    })),
    next: rows.length === limit && last !== undefined ? encodeCursor('effects', [last.k1, last.key]) : null,
  }
}

interface ClaimRow {
  key: string
  state: string
  expires_at: Date | null
  expired: boolean
}

interface SchedulerRow {
  queue: string
  id: string
  pattern: string | null
  tz: string | null
  every_ms: string | null
  next_run_at: Date
  last_run_at: Date | null
  job_name: string
  job_data: unknown
  job_opts: unknown
}

export async function listSchedulers(db: DashboardDb) {
  const rows = await db.query<SchedulerRow>('dashboard-schedulers', [MAX_SCHEDULERS])
  return {
    schedulers: rows.map((s) => ({
      queue: s.queue,
      id: s.id,
      pattern: s.pattern,
      tz: s.tz,
      everyMs: s.every_ms === null ? null : Number(s.every_ms),
      nextRunAt: s.next_run_at.toISOString(),
      lastRunAt: iso(s.last_run_at),
      name: s.job_name,
      data: s.job_data,
      opts: s.job_opts,
    })),
  }
}

export async function failedGroups(db: DashboardDb, q: { queue?: string }) {
  const queues = await queuesOf(db, q.queue)
  const rows = await db.query<{ queue: string; error: string; count: number; last_at: Date; ids: string[] }>(
    'dashboard-failed-groups',
    [queues, FAILED_SAMPLE],
  )
  const read = new Map<string, number>()
  for (const r of rows) read.set(r.queue, (read.get(r.queue) ?? 0) + r.count)
  return {
    groups: rows.map((r) => ({
      queue: r.queue,
      error: r.error,
      count: r.count,
      lastAt: r.last_at.toISOString(),
      ids: r.ids,
    })),
    // Queues with more failed jobs than were read: the groups count the newest FAILED_SAMPLE.
    sampled: [...read].filter(([, n]) => n >= FAILED_SAMPLE).map(([queue]) => queue),
    sampleSize: FAILED_SAMPLE,
  }
}
