// The worker's statements against the jobs table: claim, complete, fail, heartbeat, release, next due time.

import type pg from 'pg'
import type { Backoff, JobRow } from '../job.js'
import { prepared } from '../db/prepared.js'

/** A job as the claim returns it: what the handler sees, plus the lock token that fences every later change. */
export interface ClaimedRow {
  id: string
  queue: string
  name: string
  job_id: string | null
  data: unknown
  priority: number
  attempts: number
  max_attempts: number
  backoff: Backoff | null
  dedup_key: string | null
  lock_token: string
  last_error: string | null
  error_stack: string | null
  run_at_ms: number
  created_at_ms: number
}

/** One finished handler's completion. */
export interface Completion {
  id: string
  token: string
  /** The result as JSON text, or null. */
  resultJson: string | null
}

export interface CompletionOutcome {
  /** Lock tokens of the runs whose completion was recorded; the others' leases had been lost. */
  completed: Set<string>
  /** Ids of the jobs completed. */
  ids: string[]
  /** Some dependents of these jobs still wait on a parent that looked unfinished: promote them again after commit. */
  childrenWaiting: boolean
}

/** The stored shape of a claimed row, with the columns the claim does not read filled in. */
export function claimedToJobRow(r: ClaimedRow): JobRow {
  return {
    id: r.id, queue: r.queue, name: r.name, job_id: r.job_id, data: r.data, state: 'active',
    priority: r.priority, run_at: new Date(r.run_at_ms), attempts: r.attempts, max_attempts: r.max_attempts,
    backoff: r.backoff, dedup_key: r.dedup_key, lock_token: r.lock_token, locked_until: null,
    last_error: r.last_error, error_stack: r.error_stack, created_at: new Date(r.created_at_ms), finished_at: null,
  }
}

/** Anything that runs a pg query config: the worker's pool, or a client inside `ctx.transaction`. */
export interface PgRunner {
  query<R extends pg.QueryResultRow>(config: pg.QueryConfig): Promise<pg.QueryResult<R>>
}

export class JobStore {
  /**
   * Multi-row changes of this worker's active jobs (completion batches, heartbeats,
   * releases) run one at a time: two of them locking the same rows in different
   * orders could deadlock. Single-row changes need no turn.
   */
  private turn: Promise<unknown> = Promise.resolve()

  constructor(
    private readonly pool: PgRunner,
    private readonly schema: string,
    private readonly queue: string,
    private readonly workerId: string,
    private readonly leaseMs: number,
  ) {}

  /**
   * Claims up to `limit` due jobs in one statement (FOR UPDATE SKIP LOCKED), in priority order.
   * When none is due and `signUp` is given, the worker signs up for hand-offs in the same statement.
   */
  async claim(limit: number, signUp: { aliveKey: string; ttlMs: number } | null): Promise<ClaimedRow[]> {
    const { rows } = await this.pool.query<ClaimedRow>({
      ...prepared('claim-due-jobs', this.schema),
      values: [this.queue, limit, this.leaseMs, this.workerId, signUp?.aliveKey ?? null, signUp?.ttlMs ?? null],
    })
    return rows
  }

  /** Jobs handed to this worker that it does not hold (tokens `held`): a NOTIFY lost with a LISTEN connection, or too large to carry the job. */
  async unheldHandoffs(held: string[]): Promise<ClaimedRow[]> {
    const { rows } = await this.pool.query<ClaimedRow>({ ...prepared('get-unheld-handoffs', this.schema), values: [this.workerId, held] })
    return rows
  }

  /** Withdraws this worker's idle sign-ups: no more hand-offs. */
  async withdraw(): Promise<void> {
    await this.pool.query({ ...prepared('withdraw-idle-worker', this.schema), values: [this.workerId] })
  }

  /** Returns jobs handed to this worker that it does not hold (tokens `held`) to the queue; how many. */
  async releaseUnheld(held: string[]): Promise<number> {
    const { rows } = await this.pool.query<{ count: number }>({ ...prepared('release-unheld-handoffs', this.schema), values: [this.workerId, held] })
    return rows[0]?.count ?? 0
  }

  /** Runs `fn` after the previous multi-row change has finished. */
  private inTurn<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.turn.then(fn, fn)
    this.turn = next.catch(() => {})
    return next
  }

  /** Completes many jobs in one statement; `runner` lets `ctx.transaction` complete its one job inside the caller's transaction. */
  async complete(items: readonly Completion[], runner?: PgRunner): Promise<CompletionOutcome> {
    const ids: string[] = []
    const tokens: string[] = []
    const results: (string | null)[] = []
    for (const c of items) {
      ids.push(c.id)
      tokens.push(c.token)
      results.push(c.resultJson)
    }
    const query = { ...prepared('complete-jobs', this.schema), values: [ids, tokens, results, 'active'] }
    type Row = { id: string; token: string; children_waiting: number }
    const { rows } = runner === undefined
      ? await this.inTurn(() => this.pool.query<Row>(query))
      : await runner.query<Row>(query)
    const outcome: CompletionOutcome = { completed: new Set(), ids: [], childrenWaiting: false }
    for (const r of rows) {
      outcome.completed.add(r.token)
      outcome.ids.push(r.id)
      if (r.children_waiting > 0) outcome.childrenWaiting = true
    }
    return outcome
  }

  /** Promotes dependents of `parentIds` whose dependencies have all completed (run after the completion committed). */
  async promoteDependents(parentIds: string[] | null, limit: number): Promise<number> {
    const { rows } = await this.pool.query<{ count: number }>({
      ...prepared('promote-dependents', this.schema), values: [parentIds, limit],
    })
    return rows[0]?.count ?? 0
  }

  /** Records a failed attempt: retried after `delayMs`, or failed for good; null if the lease was lost. */
  async fail(id: string, token: string, message: string, stack: string | null, delayMs: number): Promise<JobRow | null> {
    const { rows } = await this.pool.query<JobRow>({
      ...prepared('fail-job', this.schema), values: [id, token, message, stack, delayMs, 'active'],
    })
    return rows[0] ?? null
  }

  /** Extends the leases of jobs still held with these tokens; returns the tokens still valid. */
  async heartbeat(ids: string[], tokens: string[]): Promise<Set<string>> {
    const { rows } = await this.inTurn(() => this.pool.query<{ token: string }>({
      ...prepared('heartbeat', this.schema), values: [ids, tokens, this.leaseMs, 'active'],
    }))
    return new Set(rows.map((r) => r.token))
  }

  /** Puts held jobs back without counting the attempt, due as before (`delayMs` 0) or later; returns how many. */
  async release(ids: string[], tokens: string[], delayMs: number): Promise<number> {
    const { rows } = await this.inTurn(() => this.pool.query<{ count: number }>({
      ...prepared('release-jobs', this.schema), values: [ids, tokens, delayMs, 'active'],
    }))
    return rows[0]?.count ?? 0
  }

  /** Milliseconds until this queue's next pending job is due (database clock), or null if none is pending. */
  async nextDueInMs(): Promise<number | null> {
    const { rows } = await this.pool.query<{ wait_ms: number | null }>({
      ...prepared('next-run-at', this.schema), values: [this.queue],
    })
    return rows[0]?.wait_ms ?? null
  }
}
