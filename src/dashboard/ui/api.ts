// The dashboard's JSON API as the browser sees it: the answer shapes of docs/dashboard.md and one bounded fetch.

export type Action = 'retry' | 'cancel' | 'remove' | 'promote' | 'pause' | 'resume' | 'removeKey' | 'runScheduler'
export type JobAction = 'retry' | 'cancel' | 'remove' | 'promote'

export interface Config {
  readOnly: boolean
  actions: Record<Action, boolean>
}

export const STATES = ['waiting', 'delayed', 'waiting-children', 'active', 'completed', 'failed', 'cancelled'] as const
export type State = (typeof STATES)[number]

export interface QueueInfo {
  name: string
  paused: boolean
  counts: Record<State, number>
  /** The states whose count reached the server's cap and is the planner's estimate instead. */
  countsEstimated?: State[]
  throughput: { completedLastHour: number; failedLastHour: number; perMinute: number[] }
  retention: Record<string, unknown> | null
  limits: QueueLimits | null
}

/** A queue's flow-control limits (null: none set) and what of them is in use now. */
export interface QueueLimits {
  concurrency: number | null
  slotsInUse: number
  rateLimit: { max: number; durationMs: number } | null
  startsInWindow: number
  /** A handler's ctx.rateLimit holds the queue until then. */
  heldUntil: string | null
  /** The limits each group id has (null: none), and the group slots in use, all groups together. */
  group: {
    concurrency: number | null
    rateLimit: { max: number; durationMs: number } | null
    slotsInUse: number
  } | null
}

export interface JobSummary {
  id: string
  queue: string
  name: string
  state: State
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

export interface JobRef {
  id: string
  name: string
  state: State
}

export interface JobDetail extends JobSummary {
  data: unknown
  result: unknown
  progress: unknown
  errorStack: string | null
  backoff: unknown
  lockedBy: string | null
  lockedUntil: string | null
  cancelRequestedAt: string | null
  /** How often a worker lost the job's lease while running it. */
  stalls?: number
  timeline: { at: string; event: string; detail?: string }[]
  dependencies: { parents: JobRef[]; children: JobRef[] }
  key: { key: string; expiresAt: string | null; held: boolean } | null
  effects: { key: string; recordedAt: string }[]
  waitsFor: { reason: 'delay' | 'parents' | 'paused' | 'limit'; detail: string; until?: string }[]
}

export interface HeldKey {
  queue: string
  key: string
  ownerId: string
  ownerState: State
  ownerName: string
  expiresAt: string | null
  createdAt: string
  ageMs: number
}

export interface Effect {
  key: string
  jobId: string | null
  recordedAt: string
}

export interface Claim {
  key: string
  state: string
  jobId: string | null
  expiresAt: string | null
  /** A running claim whose holder's time is up: the next runOnce of the key takes it over. */
  expired?: boolean
}

export interface Scheduler {
  queue: string
  id: string
  pattern: string | null
  tz?: string | null
  everyMs: number | null
  nextRunAt: string | null
  lastRunAt: string | null
  name: string
  data: unknown
}

export interface FailedGroup {
  queue: string
  error: string
  count: number
  lastAt: string
  ids: string[]
}

export interface Page {
  next: string | null
}

/** A refused or failed call, with the API's error code (`FORBIDDEN`, `CONFLICT`, …) or `NETWORK`. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message)
  }
}

// A dashboard call that never waits forever: a stalled server shows an error, and the next poll tries again.
const TIMEOUT_MS = 10_000

/** Calls `api/<path>` relative to the page's `<base href>`, so any basePath works; answers the parsed JSON. */
export async function call<T>(path: string, method: 'GET' | 'POST' | 'DELETE' = 'GET', body?: unknown): Promise<T> {
  const init: RequestInit = { method, signal: AbortSignal.timeout(TIMEOUT_MS), credentials: 'same-origin' }
  if (method !== 'GET') {
    init.headers = { 'content-type': 'application/json' }
    init.body = JSON.stringify(body ?? {})
  }
  let response: Response
  try {
    response = await fetch(`api/${path}`, init)
  } catch (error) {
    throw new ApiError(0, 'NETWORK', `The dashboard's server did not answer (${String(error)})`)
  }
  const text = await response.text()
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    throw new ApiError(response.status, 'INTERNAL', `${response.status}: ${text.slice(0, 200)}`)
  }
  if (!response.ok) {
    const error = (parsed as { error?: { code?: string; message?: string } }).error
    throw new ApiError(response.status, error?.code ?? 'INTERNAL', error?.message ?? `HTTP ${response.status}`)
  }
  return parsed as T
}

/** A query string of the given parameters, empty ones left out. */
export function query(params: Record<string, string | undefined>): string {
  const search = new URLSearchParams()
  for (const [name, value] of Object.entries(params)) if (value) search.set(name, value)
  const text = search.toString()
  return text ? `?${text}` : ''
}
