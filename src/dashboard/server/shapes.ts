// The JSON shapes of the API (docs/dashboard.md, "API"): rows of the database as the UI and scripts read them.

/** A jobs row as the list statements select it (sql/dashboard-jobs-*.sql). */
export interface SummaryRow {
  id: string
  queue: string
  name: string
  state: string
  job_id: string | null
  dedup_key: string | null
  priority: number
  attempts: number
  max_attempts: number
  run_at: Date
  created_at: Date
  started_at: Date | null
  finished_at: Date | null
  last_error: string | null
}

export interface JobSummary {
  id: string
  queue: string
  name: string
  state: string
  jobId: string | null
  dedupKey: string | null
  priority: number
  attempts: number
  maxAttempts: number
  runAt: string
  createdAt: string
  startedAt: string | null
  finishedAt: string | null
  lastError: string | null
}

export const iso = (d: Date | null | undefined): string | null =>
  d === null || d === undefined ? null : d.toISOString()

export function jobSummary(r: SummaryRow): JobSummary {
  return {
    id: String(r.id),
    queue: r.queue,
    name: r.name,
    state: r.state,
    jobId: r.job_id,
    dedupKey: r.dedup_key,
    priority: r.priority,
    attempts: r.attempts,
    maxAttempts: r.max_attempts,
    runAt: r.run_at.toISOString(),
    createdAt: r.created_at.toISOString(),
    startedAt: iso(r.started_at),
    finishedAt: iso(r.finished_at),
    lastError: r.last_error,
  }
}
