// The worker's statements against the jobs table: claim, complete, fail, release, heartbeat, progress, next due time.

import type pg from 'pg'
import { randomBytes } from 'node:crypto'
import type { Backoff, JobRow, JobState } from '../job.js'
import { prepared } from '../db/prepared.js'

/** A job as the claim returns it: what the handler sees, plus the lock token that fences every later change. */
export interface ClaimedRow {
  id: string
  queue: string
  name: string
  job_id: string | null
  data: unknown
  /** Always 'active': a claim starts what it takes (attempt counted). */
  state: 'active'
  priority: number
  attempts: number
  max_attempts: number
  backoff: Backoff | null
  dedup_key: string | null
  lock_token: string
  last_error: string | null
  error_stack: string | null
  progress: unknown
  trace_context: string | null
  run_at_ms: number
  created_at_ms: number
  /** The job's own timeout in ms; null: the worker's timeoutMs, if any. */
  timeout_ms: number | null
}

/** A row a claim returned: a claimed row and its run_at exactly, for the cursor. */
export interface FetchedRow extends ClaimedRow {
  /** run_at in microseconds since the epoch (a bigint as text): exact, where run_at_ms is rounded. */
  run_at_us: string
  /** From sql/claim-jobs-grouped.sql: the last group, in its walk's order, that the claim served (the next $10). */
  group_cursor?: string | null
}

/** Where a claim starts in the fetch order (priority, run_at, id): after the last row the previous claim returned. */
export interface ClaimCursor {
  priority: number
  /** Microseconds since the epoch (FetchedRow.run_at_us). */
  runAtUs: string
  id: string
}

/** The start of the fetch order: every job of the queue sorts after it (year -1199). */
export const HEAD: ClaimCursor = { priority: -2_147_483_648, runAtUs: '-100000000000000000', id: '0' }

/** One finished handler's completion. */
export interface Completion {
  id: string
  token: string
  /** The result as JSON text, or null. */
  resultJson: string | null
}

/** The stored shape of a claimed row, with the columns the claim does not read filled in. */
export function claimedToJobRow(r: ClaimedRow): JobRow {
  return {
    id: r.id,
    queue: r.queue,
    name: r.name,
    job_id: r.job_id,
    data: r.data,
    state: r.state,
    priority: r.priority,
    run_at: new Date(r.run_at_ms),
    attempts: r.attempts,
    max_attempts: r.max_attempts,
    backoff: r.backoff,
    dedup_key: r.dedup_key,
    lock_token: r.lock_token,
    locked_until: null,
    last_error: r.last_error,
    error_stack: r.error_stack,
    created_at: new Date(r.created_at_ms),
    finished_at: null,
    started_at: null,
    result: null,
    progress: r.progress,
    cancel_requested_at: null,
    timeout_ms: r.timeout_ms,
  }
}

/** Anything that runs a pg query config: the worker's pool, or a client inside `ctx.transaction`. */
export interface PgRunner {
  query<R extends pg.QueryResultRow>(config: pg.QueryConfig): Promise<pg.QueryResult<R>>
}

/** How often a worker of a limited queue looks whether its limits were cleared (it then claims the plain way). */
const LIMITS_RECHECK_MS = 2_000

export class JobStore {
  /**
   * Multi-row changes of this worker's jobs (completions, heartbeats, releases) run one at a time: two of them locking
   * the same rows in different orders could deadlock. Single-row changes need no turn.
   */
  private turn: Promise<unknown> = Promise.resolve()
  /** Whether the queue has limits (sql/queue-limited.sql), as last read; null: not read yet. */
  private limited: boolean | null = null
  /** Whether those limits include group limits (or a held group): sql/claim-jobs-grouped.sql. */
  private grouped = false
  private limitedAt = 0
  /** Where this worker's next grouped claim walks the groups from: after the group its last one served last. */
  private groupCursor = ''

  constructor(
    private readonly pool: PgRunner,
    private readonly schema: string,
    private readonly queue: string,
    private readonly workerId: string,
    private readonly leaseMs: number,
    /** Named prepared statements; false behind a transaction-mode pooler (PgBouncer), which cannot keep them. */
    private readonly named: boolean,
    /** The worker's timeoutMs, for the jobs without their own; null: none. */
    private readonly timeoutMs: number | null = null,
  ) {}

  private run<R extends pg.QueryResultRow>(
    name: string,
    values: unknown[],
    runner: PgRunner = this.pool,
  ): Promise<pg.QueryResult<R>> {
    const q = prepared(name, this.schema)
    return runner.query<R>(this.named ? { name: q.name, text: q.text, values } : { text: q.text, values })
  }

  /** Runs `fn` after the previous multi-row change has finished. */
  private inTurn<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.turn.then(fn, fn)
    this.turn = next.catch(() => {})
    return next
  }

  /**
   * Claims and starts up to `limit` due jobs after `from` in the fetch order (FOR UPDATE SKIP LOCKED), their lock
   * tokens beginning with `tokenPrefix` (newTokenPrefix()), each run's deadline set (timeout_at). A queue with limits
   * is claimed with sql/claim-jobs-limited.sql; sql/claim-jobs.sql, which a queue without limits keeps, gives nothing
   * for one, so that a limit set after this worker last looked is obeyed at once: an empty plain claim looks again.
   * A queue with group limits, or a group held by ctx.rateLimit, is claimed with sql/claim-jobs-grouped.sql.
   */
  async claim(limit: number, from: ClaimCursor, tokenPrefix: string): Promise<FetchedRow[]> {
    if (this.limited === null || (this.limited && performance.now() - this.limitedAt > LIMITS_RECHECK_MS)) {
      await this.readLimited()
    }
    if (!this.limited) {
      const rows = await this.claimWith('claim-jobs', limit, from, tokenPrefix)
      if (rows.length > 0) return rows
      await this.readLimited()
      if (!this.limited) return rows
    }
    if (this.grouped) return this.claimWith('claim-jobs-grouped', limit, from, tokenPrefix)
    const rows = await this.claimWith('claim-jobs-limited', limit, from, tokenPrefix)
    if (rows.length > 0) return rows
    // claim-jobs-limited gives nothing once the queue has group limits: look again.
    await this.readLimited()
    if (!this.grouped) return rows
    return this.claimWith('claim-jobs-grouped', limit, from, tokenPrefix)
  }

  /** Whether the queue had limits when last read: its completions free slots (src/worker/completer.ts). */
  get claimsLimited(): boolean {
    return this.limited === true
  }

  private async readLimited(): Promise<void> {
    const { rows } = await this.run<{ limited: boolean; grouped: boolean }>('queue-limited', [this.queue])
    this.limited = rows[0]?.limited ?? false
    this.grouped = rows[0]?.grouped ?? false
    this.limitedAt = performance.now()
  }

  private async claimWith(
    statement: 'claim-jobs' | 'claim-jobs-limited' | 'claim-jobs-grouped',
    limit: number,
    from: ClaimCursor,
    tokenPrefix: string,
  ): Promise<FetchedRow[]> {
    const values = [
      this.queue,
      limit,
      this.leaseMs,
      this.workerId,
      tokenPrefix,
      from.priority,
      from.runAtUs,
      from.id,
      this.timeoutMs,
    ]
    if (statement !== 'claim-jobs-grouped') return (await this.run<FetchedRow>(statement, values)).rows
    const { rows } = await this.run<FetchedRow>(statement, [...values, this.groupCursor])
    this.groupCursor = rows[0]?.group_cursor ?? this.groupCursor
    return rows
  }

  /** Gives back what a claim with `tokenPrefix` took if its answer was lost (nothing if it never committed); how many. */
  async releaseLostClaim(tokenPrefix: string): Promise<number> {
    const { rows } = await this.run<{ count: number }>('release-lost-claim', [this.queue, this.workerId, tokenPrefix])
    return rows[0]?.count ?? 0
  }

  /**
   * Completes jobs whose handlers returned. For each token changed: its new state (completed, or cancelled if that was
   * requested meanwhile); a token missing from the answer lost its lease. `runner` lets
   * `ctx.transaction` complete its job inside the caller's transaction; otherwise the statement takes its turn among
   * the worker's multi-row changes (see `inTurn`).
   */
  async complete(done: readonly Completion[], runner?: PgRunner): Promise<Map<string, JobState>> {
    const d = byId(done)
    const values = [d.map((c) => c.id), d.map((c) => c.token), d.map((c) => c.resultJson)]
    const { rows } =
      runner !== undefined
        ? await this.run<TokenState>('complete-jobs', values, runner)
        : await this.inTurn(() => this.run<TokenState>('complete-jobs', values))
    return new Map(rows.map((r) => [r.token, r.state]))
  }

  /**
   * Of these runs, the ones whose outcome is recorded (the job's row still carries their token and no longer holds a
   * lease): after a statement whose reply was lost, it tells whether the statement committed.
   */
  async recorded(ids: string[], tokens: string[]): Promise<Map<string, JobState>> {
    const { rows } = await this.run<TokenState>('outcome-recorded', [ids, tokens])
    return new Map(rows.map((r) => [r.token, r.state]))
  }

  /** Records a failed attempt: retried after `delayMs`, failed for good, or cancelled; null if the lease was lost. */
  async fail(
    id: string,
    token: string,
    message: string,
    stack: string | null,
    delayMs: number,
  ): Promise<JobRow | null> {
    const { rows } = await this.run<JobRow>('fail-job', [id, token, message, stack, delayMs])
    return rows[0] ?? null
  }

  /** Extends the leases of jobs still held with these tokens; for each token still valid, whether cancellation was requested. */
  async heartbeat(ids: string[], tokens: string[]): Promise<Map<string, boolean>> {
    const jobs = byId(ids.map((id, i) => ({ id, token: tokens[i] as string })))
    const { rows } = await this.inTurn(() =>
      this.run<{ token: string; cancel_requested: boolean }>('heartbeat', [
        jobs.map((j) => j.id),
        jobs.map((j) => j.token),
        this.leaseMs,
      ]),
    )
    return new Map(rows.map((r) => [r.token, r.cancel_requested]))
  }

  /** Gives held jobs back without counting their run, due as before (`delayMs` 0) or later; returns how many. */
  async release(ids: string[], tokens: string[], delayMs: number): Promise<number> {
    const jobs = byId(ids.map((id, i) => ({ id, token: tokens[i] as string })))
    const { rows } = await this.inTurn(() =>
      this.run<{ count: number }>('release-jobs', [jobs.map((j) => j.id), jobs.map((j) => j.token), delayMs]),
    )
    return rows[0]?.count ?? 0
  }

  /** ctx.rateLimit: no job of the queue starts for `ms` (database clock). */
  async holdQueue(ms: number): Promise<void> {
    await this.run('hold-queue', [this.queue, ms])
  }

  /**
   * ctx.rateLimit with scope 'group': no job of this run's job's group starts for `ms`. 'lost' if the run no longer
   * holds the job, 'no-group' if the job has none (nothing is written then).
   */
  async holdGroup(id: string, token: string, ms: number): Promise<'held' | 'lost' | 'no-group'> {
    const { rows } = await this.run<{ held: boolean; grouped: boolean }>('hold-group', [id, token, ms])
    const r = rows[0]
    return r?.held !== true ? 'lost' : r.grouped ? 'held' : 'no-group'
  }

  /** Stores a running job's progress; false if the lease was lost. */
  async progress(id: string, token: string, json: string): Promise<boolean> {
    const { rows } = await this.run('update-progress', [id, token, json])
    return rows.length > 0
  }

  /** Milliseconds until this queue's next delayed job is due (database clock), or null if none is delayed. */
  async nextDueInMs(): Promise<number | null> {
    const { rows } = await this.run<{ wait_ms: number | null }>('next-run-at', [this.queue])
    return rows[0]?.wait_ms ?? null
  }
}

/** A run's lock token and the state its statement left the job in. */
interface TokenState {
  token: string
  state: JobState
}

/**
 * The items in ascending job id order (ids are bigint text): every multi-row statement of a worker locks its rows in
 * this one order, found by primary key in array order, so that two in flight together never deadlock.
 */
function byId<T extends { id: string }>(items: readonly T[]): T[] {
  return [...items].sort((a, b) => a.id.length - b.id.length || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
}

/** A claim's own first 8 bytes of its lock tokens, as sql/claim-jobs.sql takes them: 'xxxxxxxx-xxxx-xxxx-'. */
export function newTokenPrefix(): string {
  const hex = randomBytes(8).toString('hex')
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12)}-`
}
