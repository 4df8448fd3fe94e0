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
  return reasons
}

export async function getJobDetail(db: DashboardDb, idText: string) {
  const id = checkId(idText)
  const [j] = await db.query<JobRow>('dashboard-job', [id])
  if (j === undefined) throw notFound(`job ${id}`)
  const relations = await db.query<RelationRow>('dashboard-job-relations', [id, RELATED])
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
      // The ledger records the effect's key and time, not the job that recorded it (docs/dashboard.md).
      effects: [] as { key: string; recordedAt: string }[],
      waitsFor: waitsFor(j),
    },
  }
}
