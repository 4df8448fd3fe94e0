// GET api/jobs/:id: one job with its timeline, dependencies, key, effects and why it waits.

import type { DashboardDb } from './db.js'
import { badRequest, notFound } from './http-error.js'
import { type SummaryRow, iso, jobSummary } from './shapes.js'

/** At most this many parents and children listed on a job's page. */
const RELATED = 100

interface JobRow extends SummaryRow {
  data: unknown
  result: unknown
  progress: unknown
  error_stack: string | null
  backoff: unknown
  locked_by: string | null
  locked_until: Date | null
  cancel_requested_at: Date | null
  stalls: number
  queue_paused: boolean
  not_due: boolean
  open_parents: number
  held_by:
    | 'paused'
    | 'ctx.rateLimit'
    | 'concurrency'
    | 'rateLimit'
    | 'group ctx.rateLimit'
    | 'group concurrency'
    | 'group rate'
    | null
  limit_concurrency: number | null
  limit_rate_max: number | null
  limit_rate_duration_ms: string | null
  limit_held_until: Date | null
}

interface RelationRow {
  kind: 'parent' | 'child' | 'key'
  id: string | null
  name: string | null
  state: string | null
  key: string | null
  expires_at: Date | null
  held: boolean | null
}

export function checkId(value: string): string {
  if (!/^[1-9][0-9]{0,17}$/.test(value)) throw badRequest('id: must be a job id (digits)')
  return value
}

/**
 * What the row tells of the job's life: pgonce keeps no event history, so the timeline is the row's own times (added,
 * due, last started, cancel asked, finished), each once, in order.
 */
function timeline(j: JobRow) {
  const events: { at: string; event: string; detail?: string }[] = []
  events.push({ at: j.created_at.toISOString(), event: 'created' })
  if (j.run_at.getTime() > j.created_at.getTime() + 1) {
    events.push({ at: j.run_at.toISOString(), event: 'scheduled', detail: 'due' })
  }
  if (j.started_at !== null) {
    events.push({
      at: j.started_at.toISOString(),
      event: 'started',
      detail: `attempt ${j.attempts} of ${j.max_attempts}`,
    })
  }
  if (j.cancel_requested_at !== null)
    events.push({ at: j.cancel_requested_at.toISOString(), event: 'cancel-requested' })
  if (j.finished_at !== null) {
    const detail = j.state === 'failed' && j.last_error !== null ? { detail: j.last_error } : {}
    events.push({ at: j.finished_at.toISOString(), event: j.state, ...detail })
  }
  return events.sort((a, b) => a.at.localeCompare(b.at))
}

/** Why a pending job has not run yet. */
function waitsFor(j: JobRow) {
  const reasons: { reason: string; detail: string; until?: string }[] = []
  const pending = j.state === 'waiting' || j.state === 'delayed' || j.state === 'waiting-children'
  if (!pending) return reasons
  if (j.state === 'delayed' && j.not_due) {
    reasons.push({ reason: 'delay', detail: 'delayed until its run time', until: j.run_at.toISOString() })
  }
  if (j.state === 'waiting-children') {
    reasons.push({ reason: 'parents', detail: `${j.open_parents} of its parents have not completed` })
  }
  if (j.queue_paused) reasons.push({ reason: 'paused', detail: `queue ${j.queue} is paused` })
  const limit = limitReason(j)
  if (limit !== null) reasons.push(limit)
  return reasons
}

/** The flow-control limit holding a due job back (docs/flow-control.md), as the held_jobs view names it. */
function limitReason(j: JobRow): { reason: string; detail: string; until?: string } | null {
  switch (j.held_by) {
    case 'concurrency':
      return {
        reason: 'limit',
        detail: `all ${j.limit_concurrency} of queue ${j.queue}'s concurrency slots are in use`,
      }
    case 'rateLimit':
      return {
        reason: 'limit',
        detail: `queue ${j.queue} started ${j.limit_rate_max} jobs within the last ${Number(j.limit_rate_duration_ms)} ms`,
      }
    case 'ctx.rateLimit':
      return {
        reason: 'limit',
        detail: `a handler's ctx.rateLimit holds queue ${j.queue}`,
        ...(j.limit_held_until !== null ? { until: j.limit_held_until.toISOString() } : {}),
      }
    case 'group concurrency':
    case 'group rate':
    case 'group ctx.rateLimit':
      return { reason: 'limit', detail: `its group is held by the queue's ${j.held_by.slice(6)} limit` }
    default:
      return null
  }
}

export async function getJobDetail(db: DashboardDb, idText: string) {
  const id = checkId(idText)
  const [j] = await db.query<JobRow>('dashboard-job', [id])
  if (j === undefined) throw notFound(`job ${id}`)
  const relations = await db.query<RelationRow>('dashboard-job-relations', [id, RELATED])
  const effects = await db.query<{ key: string; recorded_at: Date }>('dashboard-job-effects', [id, RELATED])
  const related = (kind: 'parent' | 'child') =>
    relations.filter((r) => r.kind === kind).map((r) => ({ id: r.id as string, name: r.name, state: r.state }))
  const keyRow = relations.find((r) => r.kind === 'key')
  const key =
    keyRow !== undefined
      ? { key: keyRow.key as string, expiresAt: iso(keyRow.expires_at), held: keyRow.held === true }
      : j.dedup_key !== null
        ? { key: j.dedup_key, expiresAt: null, held: false }
        : null
  return {
    job: {
      ...jobSummary(j),
      data: j.data,
      result: j.result,
      progress: j.progress,
      errorStack: j.error_stack,
      backoff: j.backoff,
      lockedBy: j.locked_by,
      lockedUntil: iso(j.locked_until),
      cancelRequestedAt: iso(j.cancel_requested_at),
      stalls: j.stalls,
      timeline: timeline(j),
      dependencies: { parents: related('parent'), children: related('child') },
      key,
      effects: effects.map((e) => ({ key: e.key, recordedAt: e.recorded_at.toISOString() })),
      waitsFor: waitsFor(j),
    },
  }
}
