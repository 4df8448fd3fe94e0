// Worker: the coordinator that wires the claim loop, the job runner, outcomes, leases and housekeeping; lifecycle.ts starts and stops them in order.

import { randomBytes } from 'node:crypto'
import { EventEmitter } from 'node:events'
import { hostname } from 'node:os'
import type { CacheOutcome } from '../cache/breaker.js'
import { Cache } from '../cache/cache.js'
import { Counters } from '../counters.js'
import { openPool } from '../db/connection.js'
import { type Transactional, executorFor } from '../db/executor.js'
import { channelOf, checkQueueName } from '../db/identifiers.js'
import { removeDedupKey } from '../dedup-key-removal.js'
import { type EffectOutcome, Effects } from '../effects.js'
import type { Job, JobOwner } from '../job.js'
import type { Logger } from '../logger.js'
import { checkOptions, fail } from '../validate.js'
import { ErrorReporter } from './error-reporter.js'
import { Fetcher } from './fetcher.js'
import { handedOffTo, isHandOff, releaseLostHandOffs } from './hand-off.js'
import { Housekeeping } from './housekeeping.js'
import { type Handler, JobRunner } from './job-runner.js'
import { type WorkerParts, startParts, stopParts } from './lifecycle.js'
import { JobStore } from './job-store.js'
import { Leases } from './leases.js'
import { Notifier } from './notifier.js'
import { listenConfig } from '../db/listen-config.js'
import { Schedules } from './schedules.js'
import { type ResolvedWorkerOptions, type WorkerOptions, resolveWorkerOptions } from './options.js'
import { type RunOutcome, Settler } from './settler.js'
import type { WorkerEvents } from './events.js'
import { StepBatcher } from './step-batcher.js'

export type { Handler } from './job-runner.js'
export type { WorkerEvents } from './events.js'

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
export class Worker<Data = unknown, Result = unknown> extends EventEmitter<WorkerEvents<Data, Result>> implements JobOwner {
  readonly queue: string
  readonly schema: string
  /** This worker's name in `jobs.locked_by` and in the LISTEN connection's application_name. */
  readonly id: string
  /** How the Redis pre-checks of ctx.runOnce and ctx.effect went, for metrics; empty without `redis`. */
  readonly cacheOutcomes: Counters<CacheOutcome>
  /** How this worker's runs ended (completed, failed, retried, cancelled, rescheduled, lease-lost), for metrics. */
  readonly runOutcomes: Counters<RunOutcome>
  /** The outcomes of this worker's ctx.effect and ctx.runOnce calls (ran, duplicate-done, …), for metrics. */
  readonly effectOutcomes: Counters<EffectOutcome>
  private readonly opts: ResolvedWorkerOptions
  private readonly logger: Logger
  private readonly errors: ErrorReporter
  /** Everything the worker runs on; lifecycle.ts starts and stops it in order. */
  private readonly parts: WorkerParts<Data, Result>
  private state: State = 'idle'
  private started: Promise<void> | undefined
  private closing: Promise<void> | undefined

  constructor(queue: string, handler: Handler<Data, Result>, options: WorkerOptions) {
    super()
    this.queue = checkQueueName(queue, 'queue')
    if (typeof handler !== 'function') fail('INVALID_TYPE', 'handler', 'must be a function')
    const { resolved, connection } = resolveWorkerOptions(options)
    this.opts = resolved
    const schema = (this.schema = resolved.schema)
    this.id = `${hostname().slice(0, 24)}:${process.pid}:${randomBytes(3).toString('hex')}`
    this.logger = resolved.logger.child({ component: 'pgonce.worker', queue: this.queue, worker: this.id })
    this.errors = new ErrorReporter((err) => this.listenerCount('error') > 0 && this.emit('error', err), this.logger, resolved.silent)
    const report = (err: Error): void => this.errors.report(err)
    const { pool, owned } = openPool(connection, this.logger, resolved.poolSize)
    const store = new JobStore(pool, schema, this.queue, this.id, resolved.leaseMs, resolved.preparedStatements)
    const cache = resolved.redis === undefined ? undefined
      : new Cache({ redis: resolved.redis, pool, schema, named: resolved.preparedStatements,
        listenConnectionString: resolved.listenConnectionString, logger: this.logger })
    this.cacheOutcomes = cache?.outcomes ?? new Counters<CacheOutcome>()
    const effects = new Effects({ pool, schema, logger: resolved.logger, migrate: false, preparedStatements: resolved.preparedStatements },
      { cache, queue: this.queue })
    const steps = new StepBatcher(store, report, this.logger)
    const settler = new Settler<Data, Result>(store, steps, {
      owner: this,
      completed: (job, result) => this.emit('completed', job, result),
      failed: (job, err) => this.emit('failed', job, err),
      cancelled: (job) => this.emit('cancelled', job),
      reportError: report,
      requeued: (ms) => (ms > 0 ? fetcher.wakeIn(ms) : fetcher.wake()),
      closed: () => this.state === 'closed',
    }, this.logger, this.queue)
    this.runOutcomes = settler.outcomes
    this.effectOutcomes = effects.outcomes
    const services = { pool, store, effects, retryLaterMs: resolved.retryLaterMs, logger: this.logger }
    const runner = new JobRunner<Data, Result>(handler, resolved.concurrency, resolved.batchSize, services, settler,
      steps, this, { capacityChanged: () => fetcher.pump(), reportError: report }, this.logger)
    const notifier = new Notifier(listenConfig(pool, resolved.listenConnectionString, `pgonce-listener ${this.id}`), channelOf(schema), schema, this.queue,
      { workerId: this.id, leaseMs: resolved.leaseMs }, {
      onNotify: (payload) => this.notified(payload),
      onReconnect: () => void releaseLostHandOffs(store, [...runner.held.keys()], this.logger).catch(report).finally(() => {
        notifier.readyForHandOffs()
        fetcher.wake()
      }),
      onError: report,
    }, this.logger)
    const fetcher = new Fetcher(store, notifier, {
      demand: () => runner.demand(),
      claimed: (rows, demand, ms) => runner.claimed(rows, demand, ms),
      canTakeHandOff: () => runner.canTakeHandOff(),
      reportError: report,
    }, resolved.pollIntervalMs, this.logger)
    this.parts = {
      pool, ownsPool: owned, schema, cache, effects, notifier, fetcher, runner, steps,
      leases: new Leases<Data>(store, runner.held, resolved.heartbeatMs, report, this.logger, () => runner.resume()),
      housekeeping: new Housekeeping(pool, schema, resolved.maintenanceIntervalMs, resolved.logger, report),
      schedules: new Schedules(pool, schema, this.queue, resolved.pollIntervalMs, this.logger, report),
    }
    if (resolved.autorun) this.run().catch(() => {})
  }

  /** Backend pid of the LISTEN connection, null while it is down. */
  get listenerPid(): number | null {
    return this.parts.notifier.pid
  }

  /**
   * Starts processing (the constructor does unless `autorun: false`); resolves once the worker listens and has
   * issued its first claim. Calling it again returns the same promise.
   */
  run(): Promise<void> {
    this.started ??= this.start().catch((err: Error) => {
      this.errors.report(err)
      throw err
    })
    return this.started
  }

  /**
   * Stops claiming, gives claimed-but-unstarted jobs back to the queue (run not counted), waits up to
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
    const execute = executorFor(tx === undefined ? this.parts.pool : tx, 'options.tx', this.opts.preparedStatements)
    return (await removeDedupKey(execute, this.parts.cache, this.schema, this.queue, key, jobId, tx !== undefined)).held
  }

  private notified(payload: string): void {
    if (payload === this.queue) this.parts.fetcher.wake()
    else if (isHandOff(payload)) {
      const row = handedOffTo(payload, this.id, this.parts.notifier.handOffPid)
      if (row !== null) this.parts.runner.handedOff(row)
    }
    // queue.cancelJob on a running job: the next heartbeat would tell; beat now.
    else if (payload.startsWith('!cancel ')) void this.parts.leases.beat()
    else if (payload === `!schedulers ${this.queue}`) this.parts.schedules.changed()
  }

  private async start(): Promise<void> {
    if (this.state !== 'idle') return
    this.state = 'starting'
    const aborted = (): boolean => this.state !== 'starting'
    if (!(await startParts(this.parts, this.opts, this.opts.logger, aborted, (err) => this.errors.report(err)))) return
    this.state = 'running'
    this.logger.info({ concurrency: this.opts.concurrency, batchSize: this.opts.batchSize }, 'pgonce: worker started')
  }

  private async shutdown(): Promise<void> {
    const wasRunning = this.state === 'running' || this.state === 'starting'
    this.state = 'closing'
    if (wasRunning) await this.started?.catch(() => {})
    await stopParts(this.parts, wasRunning, this.opts.closeTimeoutMs, () => (this.state = 'closed'))
    this.logger.info('pgonce: worker closed')
  }
}
