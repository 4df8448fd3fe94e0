// Worker: wires the claim loop, the runner, outcomes, leases, LISTEN and housekeeping, and starts and stops them in order.

import { randomBytes } from 'node:crypto'
import { EventEmitter } from 'node:events'
import { hostname } from 'node:os'
import type pg from 'pg'
import type { CacheOutcome } from '../cache/breaker.js'
import { Cache } from '../cache/cache.js'
import { Counters } from '../counters.js'
import { openPool } from '../db/connection.js'
import { type PgoncePool, closeWithin } from '../db/pool.js'
import { sqlFor } from '../db/sql-files.js'
import { type Transactional, executorFor } from '../db/executor.js'
import { channelOf, checkQueueName } from '../db/identifiers.js'
import { listenConfig } from '../db/listen-config.js'
import { removeDedupKey } from '../dedup-key-removal.js'
import { type EffectOutcome, Effects } from '../effects.js'
import type { Job, JobOwner } from '../job.js'
import type { Logger } from '../logger.js'
import { migrateUntilDone } from '../migrate/runner.js'
import { checkOptions, fail } from '../validate.js'
import type { BatchHandler, BatchOptions } from './batch.js'
import { BatchRunner, type JobRunner } from './batch-runner.js'
import { Completer, type RunOutcome } from './completer.js'
import type { HeldJob } from './context.js'
import { ErrorReporter } from './error-reporter.js'
import { Fetcher } from './fetcher.js'
import { Housekeeping } from './housekeeping.js'
import { JobStore } from './job-store.js'
import { Leases } from './leases.js'
import { type ResolvedWorkerOptions, type WorkerOptions, resolveWorkerOptions } from './options.js'
import { type Handler, Runner } from './runner.js'
import { Schedules } from './schedules.js'
import { type Listener, openListener } from './shared-listener.js'

export type { Handler } from './runner.js'
export type { BatchContext, BatchHandler, BatchOptions, BatchOutcome } from './batch.js'

/** The Worker's events. */
export type WorkerEvents<Data, Result> = {
  /** A job's completion was recorded; `result` is what is stored as `job.result`. */
  completed: [job: Job<Data>, result: Result]
  /** An attempt failed and was recorded; `job.state` says what follows: `waiting`/`delayed` (retried) or `failed` (for good). */
  failed: [job: Job<Data>, error: Error]
  /** The job ended `cancelled` (`queue.cancelJob` while it ran). */
  cancelled: [job: Job<Data>]
  /** Something went wrong outside a handler (a statement failed, a lease was lost). Never crashes the process: see `logger`. */
  error: [error: Error]
}

/**
 * The worker's own states: idle → starting (migrations, cache, LISTEN) → running → closing → closed; close() from idle
 * or starting goes straight to closing (a start in progress stops at its next step).
 */
type State = 'idle' | 'starting' | 'running' | 'closing' | 'closed'

/**
 * Runs `handler` for the jobs of queue `queue` (docs/workers.md).
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
export class Worker<Data = unknown, Result = unknown>
  extends EventEmitter<WorkerEvents<Data, Result>>
  implements JobOwner
{
  readonly queue: string
  readonly schema: string
  /**
   * This worker's name in `jobs.locked_by`, and in its LISTEN connection's application_name with `listen: 'own'` (the
   * shared one is `pgonce-listener <host>:<pid>:shared`).
   */
  readonly id: string
  /** How the Redis pre-checks of ctx.runOnce and ctx.effect went, for metrics; empty without `redis`. */
  readonly cacheOutcomes: Counters<CacheOutcome>
  /** How this worker's runs ended (completed, failed, retried, cancelled, rescheduled, lease-lost), for metrics. */
  readonly runOutcomes: Counters<RunOutcome>
  /** The outcomes of this worker's ctx.effect and ctx.runOnce calls (ran, duplicate-done, …), for metrics. */
  readonly effectOutcomes: Counters<EffectOutcome>
  // ES private fields: the options (a listen connection string, a Redis URL), the pool and everything holding it stay
  // out of what a logger, JSON.stringify or util.inspect reads from a Worker (docs/observability.md, "Logging").
  readonly #opts: ResolvedWorkerOptions
  readonly #logger: Logger
  readonly #errors: ErrorReporter
  readonly #pool: pg.Pool
  /** The pool pgonce opened (and ends), null for yours. */
  readonly #owned: PgoncePool | null
  /** How long close() may take: closeTimeoutMs for the handlers, and an answer's bound (docs/workers.md, "Graceful close"). */
  readonly #closeBoundMs: number
  readonly #cache: Cache | undefined
  readonly #effects: Effects
  readonly #notifier: Listener
  readonly #fetcher: Fetcher<Data, Result>
  readonly #runner: JobRunner<Data, Result>
  readonly #completer: Completer<Data, Result>
  readonly #leases: Leases<Data>
  readonly #housekeeping: Housekeeping
  readonly #schedules: Schedules
  private state: State = 'idle'
  private started: Promise<void> | undefined
  private closing: Promise<void> | undefined

  /** A batch handler: it gets up to `options.batch.size` jobs at once (docs/workers.md, "Batch handlers"). */
  constructor(queue: string, handler: BatchHandler<Data, Result>, options: WorkerOptions & { batch: BatchOptions })
  constructor(queue: string, handler: Handler<Data, Result>, options: WorkerOptions)
  constructor(queue: string, handler: Handler<Data, Result> | BatchHandler<Data, Result>, options: WorkerOptions) {
    super()
    this.queue = checkQueueName(queue, 'queue')
    if (typeof handler !== 'function') fail('INVALID_TYPE', 'handler', 'must be a function')
    const { resolved, connection } = resolveWorkerOptions(options)
    const opts = (this.#opts = resolved)
    const schema = (this.schema = opts.schema)
    this.id = `${hostname().slice(0, 24)}:${process.pid}:${randomBytes(3).toString('hex')}`
    const logger = (this.#logger = opts.logger.child({
      component: 'pgonce.worker',
      queue: this.queue,
      worker: this.id,
    }))
    this.#errors = new ErrorReporter(
      (err) => this.listenerCount('error') > 0 && this.emit('error', err),
      logger,
      opts.silent,
    )
    const report = (err: Error): void => this.#errors.report(err)
    const { pool, owned, bounds } = openPool(connection, logger, opts.poolSize)
    this.#pool = pool
    this.#owned = owned
    this.#closeBoundMs = opts.closeTimeoutMs + bounds.answerMs
    const store = new JobStore(pool, schema, this.queue, this.id, opts.leaseMs, opts.preparedStatements, opts.timeoutMs)
    this.#cache =
      opts.redis === undefined
        ? undefined
        : new Cache({
            redis: opts.redis,
            pool,
            schema,
            named: opts.preparedStatements,
            listenConnectionString: opts.listenConnectionString,
            logger,
          })
    this.cacheOutcomes = this.#cache?.outcomes ?? new Counters<CacheOutcome>()
    this.#effects = new Effects(
      { pool, schema, logger: opts.logger, migrate: false, preparedStatements: opts.preparedStatements },
      { cache: this.#cache, queue: this.queue },
    )
    this.effectOutcomes = this.#effects.outcomes
    // A claim of a queue with limits may have found every slot it could take held (the worker sleeps): its own
    // completions free slots, so they wake it (a limited queue's throughput 67% -> 82% of its limit, bench/flow-share.ts).
    this.#completer = new Completer<Data, Result>(store, this, this, report, logger, this.queue, () =>
      this.#fetcher.wake(),
    )
    this.runOutcomes = this.#completer.outcomes
    const services = {
      pool,
      store,
      effects: this.#effects,
      retryLaterMs: opts.retryLaterMs,
      logger,
      timeoutMs: opts.timeoutMs,
    }
    const held = new Map<string, HeldJob<Data>>()
    this.#leases = new Leases<Data>(store, held, opts.leaseMs, opts.heartbeatMs, report, logger)
    const parts = [services, this.#leases, this.#completer, this, report, logger, held] as const
    this.#runner =
      opts.batch === null
        ? new Runner<Data, Result>(handler as Handler<Data, Result>, opts.concurrency, opts.batchSize, ...parts)
        : new BatchRunner<Data, Result>(handler as BatchHandler<Data, Result>, opts.batch, opts.concurrency, ...parts)
    this.#notifier = openListener(
      opts.listen === 'shared',
      listenConfig(pool, opts.listenConnectionString, `pgonce-listener ${this.id}`),
      channelOf(schema),
      schema,
      this.queue,
      { onNotify: (payload) => this.notified(payload), onReconnect: () => this.#fetcher.wake(), onError: report },
      logger,
      (payload) => pool.query(sqlFor('notify-probe', schema), [payload]),
    )
    this.#fetcher = new Fetcher(store, this.#notifier, this.#runner, opts.pollIntervalMs, report, logger)
    this.#housekeeping = new Housekeeping(pool, schema, opts.maintenanceIntervalMs, opts.logger, report)
    this.#schedules = new Schedules(pool, schema, this.queue, opts.pollIntervalMs, logger, report)
    if (opts.autorun) this.run().catch(() => {})
  }

  /** Backend pid of the LISTEN connection (the process's shared one, or its own), null while it is down. */
  get listenerPid(): number | null {
    return this.#notifier.pid
  }

  /**
   * Starts processing (the constructor does unless `autorun: false`); resolves once the worker listens and has
   * issued its first claim. Calling it again returns the same promise.
   */
  run(): Promise<void> {
    this.started ??= this.start().catch((err: Error) => {
      this.#errors.report(err)
      throw err
    })
    return this.started
  }

  /**
   * Stops claiming, gives claimed jobs whose handlers have not started back to the queue (run not counted), waits up to
   * `closeTimeoutMs` for running handlers and their completions, then ends its connections. A handler still running
   * after the timeout sees `ctx.signal` abort; if it throws then, its job goes back to the queue without counting
   * the run, otherwise it stays active until its lease expires and housekeeping rescues it.
   */
  close(): Promise<void> {
    this.closing ??= this.shutdown()
    return this.closing
  }

  /** @internal Used by `job.removeDeduplicationKey()`: deletes the key only if job `jobId` owns it, in `tx` if given; true if it was held. */
  async removeOwnedDeduplicationKey(key: string, jobId: string, options?: { tx?: Transactional }): Promise<boolean> {
    const { tx } = checkOptions<{ tx?: Transactional }>(options, 'options', ['tx'])
    const execute = executorFor(tx === undefined ? this.#pool : tx, 'options.tx', this.#opts.preparedStatements)
    return (await removeDedupKey(execute, this.#cache, this.schema, this.queue, key, jobId, tx !== undefined)).held
  }

  private notified(payload: string): void {
    if (payload === this.queue) this.#fetcher.wake()
    // queue.cancelJob on a running job: the next heartbeat would tell; beat now.
    else if (payload.startsWith('!cancel ')) void this.#leases.beat()
    else if (payload === `!schedulers ${this.queue}`) this.#schedules.changed()
  }

  /**
   * Migrations (retried with backoff while the database is unreachable), the Redis cache, LISTEN, then the timers and
   * the first claim: LISTEN comes before the first claim, so that nothing added in between goes unnoticed. Stops,
   * having started nothing more, when close() came meanwhile.
   */
  private async start(): Promise<void> {
    if (this.state !== 'idle') return
    this.state = 'starting'
    const aborted = (): boolean => this.state !== 'starting'
    const report = (err: Error): void => this.#errors.report(err)
    if (this.#opts.migrate)
      await migrateUntilDone({ pool: this.#pool, schema: this.schema, logger: this.#opts.logger }, aborted, report)
    if (aborted()) return
    await this.#cache?.start()
    if (this.#opts.listen) await this.#notifier.start()
    if (aborted()) return
    this.#leases.start()
    this.#housekeeping.start()
    this.#schedules.start()
    this.#fetcher.start()
    this.state = 'running'
    this.#logger.info(
      { concurrency: this.#opts.concurrency, batchSize: this.#opts.batchSize, batch: this.#opts.batch },
      'pgonce: worker started',
    )
  }

  /**
   * Claims stop first (a claim in flight returns and its jobs are held), then the jobs not started go back to the
   * queue, then the running handlers get `closeTimeoutMs`; only then do leases and outcome writes stop (after that a
   * late handler's job is left to the rescue), and the connections end last.
   */
  private async shutdown(): Promise<void> {
    const wasRunning = this.state === 'running' || this.state === 'starting'
    this.state = 'closing'
    await closeWithin(
      this.#closeBoundMs,
      () => this.stopInOrder(wasRunning),
      () => {
        // Out of time: the connections are dropped and what waits on them fails; jobs not given back are rescued after their lease.
        this.#logger.warn(
          'pgonce: close ran out of time; dropping the connections (jobs not given back are rescued after their lease)',
        )
        this.#notifier.abandon()
        this.#owned?.abandon()
      },
    )
    this.state = 'closed'
    this.#logger.info('pgonce: worker closed')
  }

  private async stopInOrder(wasRunning: boolean): Promise<void> {
    if (wasRunning) {
      await this.started?.catch(() => {})
      this.#runner.refuseNewStarts()
      this.#notifier.withdraw()
      await this.#fetcher.stop()
      await this.#runner.stop()
      await this.#runner.finish(this.#opts.closeTimeoutMs)
    }
    this.#leases.stop()
    this.#completer.stop()
    this.state = 'closed'
    await this.#housekeeping.stop()
    await this.#schedules.stop()
    await this.#notifier.stop()
    await this.#effects.close()
    await this.#cache?.close()
    await this.#owned?.end()
  }
}
