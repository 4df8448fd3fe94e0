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

type ListRow = SummaryRow & { k1?: string; k2?: string; hit: boolean; window_of: string; pos: string }

/**
 * How many jobs of each queue one page of a search by data reads, at most: the search walks the state's index in the
 * list's order and tests each job's data (no index on data: docs/architecture.md), so a page costs this many rows
 * whatever the table holds. Fewer matches than a page, and a `next` cursor: the search goes on from there.
 */
export const SEARCH_WINDOW = 1_000

/**
 * The page from the rows each queue's window read (in the list's order): the hits up to where every queue was read to
 * (a queue whose window was full may have more past its last row; one whose window was not full was read to its end),
 * at most `limit` of them; `resume` is the row the next page starts after (null: nothing is left).
 */
export function cutPage(rows: ListRow[], limit: number, window: number): { page: ListRow[]; resume: ListRow | null } {
  const perWindow = new Map<string, ListRow[]>()
  for (const r of rows) perWindow.set(r.window_of, [...(perWindow.get(r.window_of) ?? []), r])
  let readTo: ListRow | null = null
  for (const read of perWindow.values()) {
    const last = read.at(-1) as ListRow
    if (read.length >= window && (readTo === null || Number(last.pos) < Number(readTo.pos))) readTo = last
  }
  const hits = rows.filter((r) => r.hit && (readTo === null || Number(r.pos) <= Number(readTo.pos)))
  if (hits.length > limit) return { page: hits.slice(0, limit), resume: hits[limit - 1] as ListRow }
  return { page: hits, resume: readTo }
}

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
  const window = data === null ? limit : SEARCH_WINDOW
  const values: unknown[] = [queues, data, after, window]
  if (list.finished === true) values.push(state)
  const { page, resume } = cutPage(await db.query<ListRow>(list.sql, values), limit, window)
  return { jobs: page.map(jobSummary), next: resume === null ? null : encodeCursor(cursorKind, list.key(resume)) }
}
