// GET api/jobs: a page of a queue's jobs (or every queue's) in one state, by keyset, or the jobs a search names.

import { checkQueueName } from '../../db/identifiers.js'
import { decodeCursor, encodeCursor } from './cursor.js'
import type { DashboardDb } from './db.js'
import { badRequest } from './http-error.js'
import { knownQueues } from './queues.js'
import { type SummaryRow, jobSummary } from './shapes.js'

export const MAX_LIMIT = 200
const DEFAULT_LIMIT = 50

/** Per state: its statement, and the sort key of a row that the next page starts after. */
const LISTS: Record<string, { sql: string; key: (r: ListRow) => string[]; finished?: boolean }> = {
  waiting: { sql: 'dashboard-jobs-waiting', key: (r) => [r.k1 as string, r.k2 as string, String(r.id)] },
  delayed: { sql: 'dashboard-jobs-delayed', key: (r) => [r.k1 as string, String(r.id)] },
  'waiting-children': { sql: 'dashboard-jobs-waiting-children', key: (r) => [String(r.id)] },
  active: { sql: 'dashboard-jobs-active', key: (r) => [String(r.id)] },
  completed: { sql: 'dashboard-jobs-finished', key: (r) => [r.k1 as string, String(r.id)], finished: true },
  failed: { sql: 'dashboard-jobs-finished', key: (r) => [r.k1 as string, String(r.id)], finished: true },
  cancelled: { sql: 'dashboard-jobs-finished', key: (r) => [r.k1 as string, String(r.id)], finished: true },
  '': { sql: 'dashboard-jobs-any', key: (r) => [String(r.id)] },
}

type ListRow = SummaryRow & { k1?: string; k2?: string }

export function parseLimit(value: string | undefined, max = MAX_LIMIT, fallback = DEFAULT_LIMIT): number {
  if (value === undefined || value === '') return fallback
  if (!/^[0-9]{1,4}$/.test(value) || Number(value) < 1 || Number(value) > max) {
    throw badRequest(`limit: must be a whole number from 1 to ${max}`)
  }
  return Number(value)
}

/** The queues a request names: one (allow-listed) or every queue the schema has seen. */
export async function queuesOf(db: DashboardDb, queue: string | undefined): Promise<string[]> {
  if (queue === undefined || queue === '') return knownQueues(db)
  return [checkQueueName(queue, 'queue')]
}

/** `data @> search` for a search starting with `{`: the JSON, checked before any I/O. */
function containment(search: string): string {
  let parsed: unknown
  try {
    parsed = JSON.parse(search)
  } catch {
    throw badRequest('search: starts with { but is not JSON (a search by data is a JSON object the data contains)')
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw badRequest('search: a search by data must be a JSON object')
  }
  return JSON.stringify(parsed)
}

export interface JobsQuery {
  queue?: string
  state?: string
  search?: string
  after?: string
  limit?: string
}

export async function listJobs(db: DashboardDb, q: JobsQuery) {
  const state = q.state ?? ''
  const list = LISTS[state]
  if (list === undefined) throw badRequest(`state: must be one of ${Object.keys(LISTS).filter(Boolean).join(', ')}`)
  const limit = parseLimit(q.limit)
  const search = q.search?.trim() ?? ''
  if (search.length > 10_000) throw badRequest('search: at most 10000 characters')
  const data = search.startsWith('{') ? containment(search) : null
  if (search !== '' && data === null) {
    // A lookup by id, jobId or dedup key: a handful of index probes, one page.
    const queues = await queuesOf(db, q.queue)
    const id = /^[0-9]{1,18}$/.test(search) ? search : null
    const rows = await db.query<SummaryRow>('dashboard-jobs-lookup', [search, queues, limit, id])
    return { jobs: rows.map(jobSummary), next: null }
  }
  const cursorKind = `jobs:${state}`
  const after = decodeCursor(q.after, cursorKind, list.key({ id: '0', k1: '', k2: '' } as ListRow).length)
  const queues = await queuesOf(db, q.queue)
  const values: unknown[] = [queues, limit, data, after]
  if (list.finished === true) values.push(state)
  const rows = await db.query<ListRow>(list.sql, values)
  const last = rows.at(-1)
  return {
    jobs: rows.map(jobSummary),
    next: rows.length === limit && last !== undefined ? encodeCursor(cursorKind, list.key(last)) : null,
  }
}
