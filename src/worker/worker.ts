// Worker: claims due jobs in batches, runs the handler under a heartbeated lease, and records each outcome fenced by its lock token.

import { randomBytes } from 'node:crypto'
import { EventEmitter } from 'node:events'
import { hostname } from 'node:os'
import type pg from 'pg'
import { openPool } from '../db/connection.js'
import { channelOf, checkQueueName } from '../db/identifiers.js'
import { sqlFor } from '../db/sql-files.js'
import { Effects } from '../effects.js'
import { LeaseLostError } from '../errors.js'
import { Job, type JobOwner, type JobRow } from '../job.js'
import type { Logger } from '../logger.js'
import { runMaintenance } from '../maintenance.js'
import { migrate } from '../migrate/runner.js'
import { fail } from '../validate.js'
import { retryDelayMs } from './backoff.js'
import { CompletionBatcher } from './completion-batcher.js'
import { type ContextServices, HeldJob, type JobContext, resultJson } from './context.js'
import { Fifo } from './fifo.js'
import { type ClaimedRow, JobStore, claimedToJobRow } from './job-store.js'
import { Notifier } from './notifier.js'
import { Pace } from './pace.js'
import { SettlePolls } from './settle.js'
import { type ResolvedWorkerOptions, type WorkerOptions, resolveWorkerOptions } from './options.js'
import { RetryLaterError } from './retry-later.js'

/** Processes one job; its return value is stored as the job's result (JSON). */
export type Handler<Data, Result> = (job: Job<Data>, ctx: JobContext) => Result | Promise<Result>

/** The Worker's events. */
export type WorkerEvents<Data, Result> = {
  /** A job's completion was recorded. */
  completed: [job: Job<Data>, result: Result]
  /** An attempt failed and was recorded; `job.state` says what follows: `waiting`/`delayed` (retried) or `failed` (for good). */
  failed: [job: Job<Data>, error: Error]
  /** Something went wrong outside a handler (a statement failed, a lease was lost). Never crashes the process: without a listener it is logged. */
  error: [error: Error]
}

type State = 'idle' | 'starting' | 'running' | 'closing' | 'closed'

/** Completions written per statement at most. */
const MAX_COMPLETION_BATCH = 2_000
/** Shortest pause before claiming again after an empty claim that found due work locked by others. */
const MIN_REWAKE_MS = 5
/** Longest pause before claiming (or migrating) again after a failure. */
const MAX_CLAIM_RETRY_MS = 5_000
/** An idle sign-up outlives this many poll intervals (each empty poll renews it), plus a second. */
const SIGN_UP_POLLS = 2
/** First settle poll after the queue ran dry (see SettlePolls); each next one waits twice as long. */
const FIRST_SETTLE_POLL_MS = 25

/**
 * Runs `handler` for the jobs of queue `queue` (DESIGN.md §3).
 *
 * ### Examples
 * ```ts
 * import { Worker } from 'pgonce'
 * const worker = new Worker<{ to: string }>('emails', async (job, ctx) => {
 *   await sendEmail(job.data.to, { signal: ctx.signal })
 * }, { connectionString: process.env.DATABASE_URL, concurrency: 8 })
 * worker.on('failed', (job, err) => console.warn(job.id, job.state, err.message))
 * process.once('SIGTERM', () => void worker.close())
 * ```
 */
export class Worker<Data = unknown, Result = unknown> extends EventEmitter<WorkerEvents<Data, Result>> implements JobOwner {
  readonly queue: string
  readonly schema: string
  /** This worker's name in `jobs.locked_by` and in the LISTEN connection's application_name. */
  readonly id: string
  private readonly opts: ResolvedWorkerOptions
  private readonly logger: Logger
  private readonly pool: pg.Pool
  private readonly ownsPool: boolean
  private readonly store: JobStore
  private readonly batcher: CompletionBatcher
  private readonly notifier: Notifier
  private readonly effects: Effects
  private readonly services: ContextServices
  private readonly buffer = new Fifo<HeldJob<Data>>()
  /** Every job claimed and not yet settled, by lock token (a stale run and its re-claim can share an id). */
  private readonly held = new Map<string, HeldJob<Data>>()
  private state: State = 'idle'
  private running = 0
  private claiming: Promise<void> | null = null
  private sleeping = false
  private wokenDuringClaim = false
  private claimRetryMs = 100
  private readonly pace = new Pace()
  private readonly settle: SettlePolls
  private beating = false
  private maintaining: Promise<void> | null = null
  private started: Promise<void> | undefined
  private closing: Promise<void> | undefined
  private pollTimer: NodeJS.Timeout | undefined
  private beatTimer: NodeJS.Timeout | undefined
  private maintenanceTimer: NodeJS.Timeout | undefined
  private dueTimer: NodeJS.Timeout | undefined
  private dueAt = Infinity
  private settledWaiters: (() => void)[] = []
  /** One set per adoption query in flight: tokens of jobs settled meanwhile, which its answer may still show active. */
  private readonly adoptions = new Set<Set<string>>()
  /** NOTIFY payloads that hand a job to this worker start with it (see idle_workers). */
  private readonly handoffPrefix: string

  constructor(queue: string, private readonly handler: Handler<Data, Result>, options: WorkerOptions) {
    super()
    this.queue = checkQueueName(queue, 'queue')
    if (typeof handler !== 'function') fail('INVALID_TYPE', 'handler', 'must be a function')
    const { resolved, connection } = resolveWorkerOptions(options)
    this.opts = resolved
    this.schema = resolved.schema
    this.id = `${hostname().slice(0, 24)}:${process.pid}:${randomBytes(3).toString('hex')}`
    this.logger = resolved.logger.child({ component: 'pgonce.worker', queue: this.queue, worker: this.id })
    const { pool, owned } = openPool(connection, this.logger, resolved.poolSize)
    this.pool = pool
    this.ownsPool = owned
    this.store = new JobStore(pool, this.schema, this.queue, this.id, resolved.leaseMs)
    this.batcher = new CompletionBatcher(this.store, MAX_COMPLETION_BATCH, (err) => this.reportError(err), this.logger)
    this.settle = new SettlePolls(FIRST_SETTLE_POLL_MS, resolved.pollIntervalMs, () => this.wake())
    this.effects = new Effects({ pool, schema: this.schema, logger: resolved.logger, migrate: false })
    this.services = { pool, store: this.store, effects: this.effects, retryLaterMs: resolved.retryLaterMs, logger: this.logger }
    // The pool's own settings, plus keepalives so that a silently dropped LISTEN connection is noticed, and a connect timeout.
    const listenConfig: pg.ClientConfig = {
      connectionTimeoutMillis: 10_000,
      ...(pool as unknown as { options: pg.ClientConfig }).options,
      application_name: `pgonce-listener ${this.id}`,
      keepAlive: true,
      keepAliveInitialDelayMillis: 10_000,
    }
    this.handoffPrefix = `handoff ${this.id} `
    const aliveKey = BigInt.asIntN(64, BigInt(`0x${randomBytes(8).toString('hex')}`)).toString()
    this.notifier = new Notifier(listenConfig, channelOf(this.schema), {
      onNotify: (payload) => {
        if (payload === this.queue) this.wake()
        else if (payload.startsWith(this.handoffPrefix)) this.takeHandoff(payload.slice(this.handoffPrefix.length))
      },
      onReconnect: () => {
        this.adoptHandoffs()
        this.wake()
      },
    }, this.logger, aliveKey)
    if (resolved.autorun) this.run().catch(() => {})
  }

  /** Backend pid of the LISTEN connection, null while it is down. */
  get listenerPid(): number | null {
    return this.notifier.pid
  }

  /**
   * Starts processing (the constructor does unless `autorun: false`); resolves once
   * the worker listens and has issued its first claim. Calling it again returns the same promise.
   */
  run(): Promise<void> {
    this.started ??= this.start().catch((err: Error) => {
      this.reportError(err)
      throw err
    })
    return this.started
  }

  /**
   * Stops claiming, returns claimed-but-unstarted jobs to the queue (attempt not
   * counted), waits up to `closeTimeoutMs` for running handlers and their
   * completions, then ends its connections. A handler still running after the
   * timeout sees `ctx.signal` abort; if it throws then, its job goes back to the
   * queue without counting the attempt, otherwise it stays active until its lease
   * expires and housekeeping rescues it.
   */
  close(): Promise<void> {
    this.closing ??= this.shutdown()
    return this.closing
  }

  /** @internal Used by `job.removeDeduplicationKey()`: deletes the key only if job `jobId` owns it. */
  async removeOwnedDeduplicationKey(key: string, jobId: string): Promise<boolean> {
    const { rows } = await this.pool.query<{ deleted: boolean }>(sqlFor('remove-dedup-key', this.schema), [this.queue, key, jobId])
    return rows[0]?.deleted ?? false
  }

  private async start(): Promise<void> {
    if (this.state !== 'idle') return
    this.state = 'starting'
    if (this.opts.migrate) await this.migrateUntilDone()
    if (this.state !== 'starting') return
    // LISTEN before the first claim, so that nothing added in between goes unnoticed.
    await this.notifier.start()
    if (this.state !== 'starting') return
    this.state = 'running'
    this.pollTimer = setInterval(() => this.wake(), this.opts.pollIntervalMs)
    this.beatTimer = setInterval(() => void this.beat(), this.opts.heartbeatMs)
    if (this.opts.maintenanceIntervalMs > 0) {
      this.maintain()
      this.maintenanceTimer = setInterval(() => this.maintain(), this.opts.maintenanceIntervalMs)
    }
    this.logger.info({ concurrency: this.opts.concurrency, batchSize: this.opts.batchSize }, 'pgonce: worker started')
    this.wake()
  }

  /** Migrates, retrying with backoff while the database is unreachable (each failure reported), until done or closed. */
  private async migrateUntilDone(): Promise<void> {
    for (let retryMs = 100; this.state === 'starting'; retryMs = Math.min(retryMs * 2, MAX_CLAIM_RETRY_MS)) {
      try {
        await migrate({ pool: this.pool, schema: this.schema, logger: this.opts.logger })
        return
      } catch (err) {
        this.reportError(err as Error)
        await new Promise((resolve) => setTimeout(resolve, retryMs))
      }
    }
  }

  // ---- fetching ----------------------------------------------------------

  /** Something may be due (NOTIFY, poll, timer, a retry): claim unless the buffer is full enough. */
  private wake(): void {
    this.sleeping = false
    if (this.claiming !== null) {
      this.wokenDuringClaim = true
      return
    }
    this.pump()
  }

  /** Starts buffered jobs on free slots, then claims more if the buffer runs low and the last claim found work. */
  private pump(): void {
    if (this.state !== 'running') return
    while (this.running < this.opts.concurrency) {
      const h = this.buffer.shift()
      if (h === undefined) break
      if (h.lost) {
        this.settled(h)
        continue
      }
      void this.execute(h)
    }
    this.maybeClaim()
  }

  /**
   * Claims when the free slots plus the prefetch (see Pace) exceed what is buffered,
   * at most `batchSize` per statement and `concurrency + batchSize` held in all.
   * While jobs are still buffered, it waits until it wants at least half the prefetch:
   * one claim is in flight at a time, and a claim for a few jobs sent just after a large
   * one returned would hold that turn (its round trip, its planning, its walk past the
   * rows the previous claim took) while the large batch is worked off, and delay the
   * next large claim until the buffer has run dry.
   */
  private maybeClaim(): void {
    if (this.state !== 'running' || this.claiming !== null || this.sleeping) return
    const { batchSize, concurrency } = this.opts
    const buffered = this.buffer.length
    const free = Math.max(0, concurrency - this.running)
    const prefetch = this.pace.prefetch(batchSize)
    const want = Math.min(batchSize, free + prefetch - buffered, concurrency + batchSize - this.running - buffered)
    if (want <= 0) return
    if (buffered > 0 && want < Math.min(batchSize, Math.ceil(prefetch / 2))) return
    this.wokenDuringClaim = false
    const busy = this.running > 0 || buffered > 0
    const sent = performance.now()
    const aliveKey = this.notifier.heldAliveKey
    const signUp = aliveKey === null ? null : { aliveKey, ttlMs: SIGN_UP_POLLS * this.opts.pollIntervalMs + 1_000 }
    this.claiming = this.store.claim(want, signUp).then(
      (rows) => {
        this.pace.claimReturned(performance.now() - sent, busy)
        this.claimed(rows)
      },
      (err: Error) => this.claimFailed(err),
    )
  }

  private claimed(rows: ClaimedRow[]): void {
    this.claiming = null
    this.claimRetryMs = 100
    for (const row of rows) this.hold(row)
    if (rows.length > 0) this.settle.busy()
    else if (!this.wokenDuringClaim) {
      // Only an empty claim puts the worker to sleep, until NOTIFY, the poll, the next due time or a settle poll.
      this.sleeping = true
      if (this.state === 'running') {
        void this.scheduleNextDue()
        this.settle.empty()
      }
    }
    this.pump()
  }

  private hold(row: ClaimedRow): HeldJob<Data> {
    const h = new HeldJob<Data>(row, new Job<Data>(claimedToJobRow(row), null, this), this.services)
    this.held.set(row.lock_token, h)
    this.buffer.push(h)
    return h
  }

  /**
   * An add handed this worker a job (already active under a lock token of ours): run it without
   * a claim. A payload too large for NOTIFY carries id and token only: the worker then reads every
   * job handed to it that it does not hold, as after a reconnect.
   */
  private takeHandoff(json: string): void {
    let row: ClaimedRow
    try {
      row = JSON.parse(json) as ClaimedRow
    } catch (err) {
      this.reportError(new Error(`pgonce: unreadable hand-off payload: ${(err as Error).message}`))
      return
    }
    // Closing: shutdown() returns every job handed to it and not held to the queue.
    if (this.state !== 'running') return
    if (row.name !== undefined) this.accept(row)
    else this.adoptHandoffs()
  }

  /**
   * Takes every job active under this worker's name that it does not hold: after the LISTEN connection was
   * replaced (a job handed over just before the old one died never announced itself), or for a hand-off
   * whose payload was too large to carry the job.
   */
  private adoptHandoffs(): void {
    if (this.state !== 'running') return
    const settled = new Set<string>()
    this.adoptions.add(settled)
    this.store.unheldHandoffs([...this.held.keys()]).then((rows) => {
      for (const row of rows) {
        if (this.state !== 'running') return
        if (settled.has(row.lock_token)) continue
        this.logger.debug({ jobId: row.id }, 'pgonce: adopting a job handed over without its row in the NOTIFY')
        this.accept(row)
      }
    }).catch((err: Error) => this.reportError(err)).finally(() => {
      this.adoptions.delete(settled)
    })
  }

  private accept(row: ClaimedRow): void {
    // Announced twice (a NOTIFY and the adoption after a reconnect): run it once.
    if (this.held.has(row.lock_token)) return
    const h = this.hold(row)
    this.settle.busy()
    this.logger.debug({ jobId: row.id }, 'pgonce: job handed over by an add')
    // Awake again: after this job the worker claims, and signs up anew if nothing is due.
    this.sleeping = false
    this.pump()
    // The lease began at the add, inside the adder's transaction, which may have stayed open for a
    // while before committing: extend it now rather than at the next heartbeat, so that housekeeping
    // cannot rescue the job while this worker runs it.
    void this.extend([h])
  }

  private claimFailed(err: Error): void {
    this.claiming = null
    this.reportError(err)
    this.sleeping = true
    this.wakeIn(this.claimRetryMs)
    this.claimRetryMs = Math.min(this.claimRetryMs * 2, MAX_CLAIM_RETRY_MS)
  }

  /** After an empty claim: sleep until the next delayed job is due (or the poll, whichever is first). */
  private async scheduleNextDue(): Promise<void> {
    try {
      const ms = await this.store.nextDueInMs()
      if (ms !== null && this.sleeping) this.wakeIn(ms)
    } catch (err) {
      this.reportError(err as Error)
    }
  }

  private wakeIn(ms: number): void {
    if (this.state !== 'running' || ms >= this.opts.pollIntervalMs) return
    const delay = Math.max(MIN_REWAKE_MS, Math.ceil(ms))
    const at = Date.now() + delay
    if (this.dueTimer !== undefined && this.dueAt <= at) return
    clearTimeout(this.dueTimer)
    this.dueAt = at
    this.dueTimer = setTimeout(() => {
      this.dueTimer = undefined
      this.dueAt = Infinity
      this.wake()
    }, delay)
  }

  // ---- running -----------------------------------------------------------

  private async execute(h: HeldJob<Data>): Promise<void> {
    this.running++
    h.phase = 'running'
    let result: Result
    try {
      result = await this.handler(h.job, h)
    } catch (err) {
      this.handlerDone(h)
      await this.settleFailure(h, toError(err)).catch((e: Error) => this.reportError(e))
      this.settled(h)
      return
    }
    this.handlerDone(h)
    await this.settleSuccess(h, result).catch((e: Error) => this.reportError(e))
    this.settled(h)
  }

  /** Frees the handler's slot at once: its outcome is written in the background (batched). */
  private handlerDone(h: HeldJob<Data>): void {
    h.phase = 'settling'
    this.running--
    this.pace.jobFinished()
    this.pump()
  }

  private async settleSuccess(h: HeldJob<Data>, result: Result): Promise<void> {
    if (this.state === 'closed') return this.tooLate(h)
    if (h.completion?.state === 'committed') {
      this.emit('completed', h.job, result)
      return
    }
    if (h.retryLaterMs !== null) return this.releaseLater(h, h.retryLaterMs)
    if (h.lost) return this.leaseLost(h, 'its handler returned')
    const ok = await this.batcher.add({ id: h.id, token: h.token, resultJson: resultJson(result, this.logger, h.id) })
    if (ok) this.emit('completed', h.job, result)
    else if (!this.batcher.stopped) this.leaseLost(h, 'its handler returned')
  }

  private async settleFailure(h: HeldJob<Data>, err: Error): Promise<void> {
    if (this.state === 'closed') return this.tooLate(h)
    if (h.completion?.state === 'committed') {
      this.logger.warn({ err, jobId: h.id }, 'pgonce: handler threw after ctx.transaction completed its job; the job stays completed')
      this.emit('completed', h.job, h.completion.result as Result)
      return
    }
    if (err instanceof RetryLaterError || h.retryLaterMs !== null) {
      return this.releaseLater(h, h.retryLaterMs ?? (err as RetryLaterError).delayMs)
    }
    if (h.abandoned) return this.releaseLater(h, 0)
    if (h.lost) return this.leaseLost(h, 'its handler threw')
    const delayMs = retryDelayMs(h.job.backoff, h.job.attempts)
    const row = await this.store.fail(h.id, h.token, storableText(err.message || String(err)), err.stack === undefined ? null : storableText(err.stack), delayMs)
    if (row === null) return this.leaseLost(h, 'its handler threw')
    this.logger.debug({ jobId: h.id, state: row.state, err }, 'pgonce: attempt failed')
    if (row.state === 'delayed') this.wakeIn(delayMs)
    else if (row.state === 'waiting') this.wake()
    this.emit('failed', new Job<Data>(row as JobRow, null, this), err)
  }

  /** Puts the job back for `delayMs` without counting the attempt. */
  private async releaseLater(h: HeldJob<Data>, delayMs: number): Promise<void> {
    const count = await this.store.release([h.id], [h.token], delayMs)
    if (count === 0) return this.leaseLost(h, 'it was to be rescheduled')
    this.logger.debug({ jobId: h.id, delayMs }, 'pgonce: job rescheduled, attempt not counted')
    if (delayMs > 0) this.wakeIn(delayMs)
    else this.wake()
  }

  private tooLate(h: HeldJob<Data>): void {
    this.logger.warn({ jobId: h.id }, 'pgonce: handler finished after close(); its job stays active until its lease expires and is rescued')
  }

  private leaseLost(h: HeldJob<Data>, when: string): void {
    this.logger.warn({ jobId: h.id, when }, 'pgonce: lease lost; the outcome of this run was not recorded')
    this.reportError(new LeaseLostError(h.id))
  }

  private settled(h: HeldJob<Data>): void {
    this.held.delete(h.token)
    for (const settledMeanwhile of this.adoptions) settledMeanwhile.add(h.token)
    if (this.held.size === 0 && this.settledWaiters.length > 0) {
      for (const resolve of this.settledWaiters.splice(0)) resolve()
    }
  }

  // ---- leases --------------------------------------------------------------

  /** Extends the leases of every held job; a job missing from the answer lost its lease. */
  private async beat(): Promise<void> {
    if (this.beating) return
    const sent: HeldJob<Data>[] = []
    for (const h of this.held.values()) {
      if (!h.lost && h.completion === null && !h.abandoned) sent.push(h)
    }
    if (sent.length === 0) return
    this.beating = true
    try {
      await this.extend(sent)
    } finally {
      this.beating = false
    }
  }

  /** Extends the leases of `sent`; a job missing from the answer lost its lease: its handler's signal aborts. */
  private async extend(sent: HeldJob<Data>[]): Promise<void> {
    try {
      const alive = await this.store.heartbeat(sent.map((h) => h.id), sent.map((h) => h.token))
      for (const h of sent) {
        // A job settling (its outcome in flight) or completed by ctx.transaction meanwhile is not lost: its own statement decides.
        if (alive.has(h.token) || !this.held.has(h.token) || h.phase === 'settling' || h.completion !== null) continue
        h.lost = true
        h.abort(new LeaseLostError(h.id))
        this.logger.warn({ jobId: h.id, phase: h.phase }, 'pgonce: lease lost (taken over after it expired, or changed by hand)')
      }
    } catch (err) {
      this.reportError(err as Error)
    }
  }

  private maintain(): void {
    if (this.maintaining !== null || this.state !== 'running') return
    this.maintaining = runMaintenance({ pool: this.pool, schema: this.schema, logger: this.opts.logger })
      .then(() => {}, (err: Error) => this.reportError(err))
      .finally(() => {
        this.maintaining = null
      })
  }

  // ---- shutdown ------------------------------------------------------------

  private async shutdown(): Promise<void> {
    const wasRunning = this.state === 'running' || this.state === 'starting'
    this.state = 'closing'
    clearInterval(this.pollTimer)
    clearInterval(this.maintenanceTimer)
    clearTimeout(this.dueTimer)
    this.settle.cancel()
    if (wasRunning) {
      await this.started?.catch(() => {})
      await this.claiming
      // No more hand-offs; one already under way is released below, once the listener is stopped.
      await this.store.withdraw().catch((err: Error) => this.reportError(err))
      await this.releaseBuffered()
      if (!(await this.allSettled(this.opts.closeTimeoutMs))) {
        const still = [...this.held.values()].filter((h) => h.phase === 'running')
        this.logger.warn({ jobs: still.map((h) => h.id) }, 'pgonce: close timed out; aborting running handlers')
        for (const h of still) {
          h.abandoned = true
          h.abort(new Error(`pgonce: worker closed before job ${h.id} finished`))
        }
        // A moment for handlers that honour the signal to throw, so that their jobs are released at once.
        await this.allSettled(Math.min(1_000, Math.max(100, this.opts.closeTimeoutMs / 10)))
      }
    }
    clearInterval(this.beatTimer)
    this.batcher.stop()
    this.state = 'closed'
    await this.maintaining
    await this.notifier.stop()
    if (wasRunning) {
      await this.store.releaseUnheld([...this.held.keys()]).catch((err: Error) => this.reportError(err))
    }
    await this.effects.close()
    if (this.ownsPool) await this.pool.end()
    this.logger.info('pgonce: worker closed')
  }

  private async releaseBuffered(): Promise<void> {
    const unstarted = this.buffer.drain()
    const live = unstarted.filter((h) => !h.lost)
    if (live.length > 0) {
      try {
        await this.store.release(live.map((h) => h.id), live.map((h) => h.token), 0)
      } catch (err) {
        this.reportError(err as Error)
      }
    }
    for (const h of unstarted) this.settled(h)
  }

  /** Resolves true once every held job has settled, false after `ms`. */
  private allSettled(ms: number): Promise<boolean> {
    if (this.held.size === 0) return Promise.resolve(true)
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(false), ms)
      this.settledWaiters.push(() => {
        clearTimeout(timer)
        resolve(true)
      })
    })
  }

  /** Emits 'error' if anyone listens, else logs it: an error must never crash the process. */
  private reportError(err: Error): void {
    if (this.listenerCount('error') > 0) this.emit('error', err)
    else this.logger.error({ err }, 'pgonce: worker error')
  }
}

/** Postgres text cannot hold NUL characters. */
function storableText(text: string): string {
  return text.includes('\u0000') ? text.replaceAll('\u0000', '\\0') : text
}

function toError(value: unknown): Error {
  if (value instanceof Error) return value
  let text: string
  try {
    text = JSON.stringify(value) ?? String(value)
  } catch {
    text = String(value)
  }
  return new Error(`handler threw a non-Error: ${text}`)
}
