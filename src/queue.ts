// Queue: adds jobs (alone, in bulk, inside your transaction), looks them up, and manages dedup keys, jobs and settings.

import type pg from 'pg'
import { admitMany, admitOne } from './admission/admit.js'
import { type AdmissionRow, admittedOrThrow } from './admission/answers.js'
import { type AddRequest, toAddRequest, toAddRequests } from './admission/request.js'
import type { CacheOutcome } from './cache/breaker.js'
import { Cache } from './cache/cache.js'
import { endingFacts } from './cache/invalidation.js'
import { keyedAdmission } from './cache/dedup-precheck.js'
import { dedupFact } from './cache/keys.js'
import { settleAfterCommit, settledEndingAdmission } from './cache/settle.js'
import { Counters } from './counters.js'
import { openPool } from './db/connection.js'
import { closeWithin, type PgoncePool } from './db/pool.js'
import { type Execute, type Transactional, executorFor } from './db/executor.js'
import { checkQueueName } from './db/identifiers.js'
import { prepared } from './db/prepared.js'
import { sqlFor } from './db/sql-files.js'
import { type AddOutcome, JOB_STATES, Job, type JobOwner, type JobRow, type JobState } from './job.js'
import type { Logger } from './logger.js'
import { SchemaReady } from './migrate/schema-ready.js'
import {
  type CancelOutcome,
  type GetJobsOptions,
  cancelJob,
  getJobs,
  getJobsParams,
  removeJob,
} from './queue-control.js'
import { QueueSettingsControl } from './queue-settings.js'
import {
  ADD_OPTION_KEYS,
  type AddOptions,
  type BulkItem,
  type JobCounts,
  type QueueOptions,
  type WriteOptions,
  resolveQueueOptions,
} from './queue-options.js'
import { removeDedupKey } from './dedup-key-removal.js'
import { promoteDelayedJob } from './promote-job.js'
import { retryFailedJob } from './retry-job.js'
import {
  type JobScheduler,
  type RepeatOptions,
  type SchedulerTemplate,
  checkScheduler,
  listSchedulers,
  removeScheduler,
  upsertScheduler,
} from './schedulers.js'
import { countInto } from './telemetry/metrics.js'
import { SpanKind, currentTraceContext, inSpan, producerAttributes } from './telemetry/tracing.js'
import { checkJobIdRef, checkOptions, checkText } from './validate.js'
import { type JobWaiters, type WaitForJobOptions, checkWaitOptions, queueWaiters } from './wait-for-job.js'

export type { AddOptions, AddOutcomeCounts, BulkItem, JobCounts, QueueOptions, WriteOptions } from './queue-options.js'
export type { WaitForJobOptions } from './wait-for-job.js'

export class Queue<Data = unknown> extends QueueSettingsControl implements JobOwner {
  readonly name: string
  readonly schema: string
  /** Outcomes of adds since this Queue was made (and 'rejected'), for metrics; also fed to the OpenTelemetry counter pgonce.jobs.added. */
  readonly outcomes: Counters<AddOutcome | 'rejected'>
  /** How the Redis pre-checks went (hit, miss, fallback, breaker-open, unsynced), for metrics; empty without `redis`. */
  readonly cacheOutcomes: Counters<CacheOutcome>
  // ES private fields: the pool (and its connection string), the cache and the logger stay out of what a logger,
  // JSON.stringify or util.inspect reads from a Queue (docs/observability.md, "Logging").
  readonly #cache: Cache | undefined
  readonly #pool: pg.Pool
  readonly #logger: Logger
  readonly #ready: SchemaReady
  /** The pool pgonce opened (and ends), null for yours. */
  readonly #owned: PgoncePool | null
  /** How long close() may take (docs/operations.md, "Bounded waits"). */
  readonly #closeBoundMs: number
  readonly #waiters: JobWaiters
  private readonly maxDataBytes: number
  private readonly named: boolean
  private closed = false

  constructor(name: string, options: QueueOptions) {
    super()
    this.name = checkQueueName(name, 'name')
    this.outcomes = new Counters<AddOutcome | 'rejected'>(countInto('adds', this.name))
    const opts = resolveQueueOptions(options, this.name)
    this.schema = opts.schema
    this.maxDataBytes = opts.maxDataBytes
    this.named = opts.named
    this.#logger = opts.logger
    const { pool, owned, bounds } = openPool(opts.connection, this.#logger, opts.poolSize)
    this.#pool = pool
    this.#owned = owned
    this.#closeBoundMs = bounds.answerMs
    this.#ready = new SchemaReady(pool, this.schema, this.#logger, opts.migrate)
    this.#cache =
      opts.redis === undefined
        ? undefined
        : new Cache({ redis: opts.redis, pool, schema: this.schema, named: this.named, logger: this.#logger })
    this.cacheOutcomes = this.#cache?.outcomes ?? new Counters<CacheOutcome>()
    this.#waiters = queueWaiters(this.name, this.schema, pool, opts, this.#logger, () => this.executor(undefined))
  }

  /**
   * Adds a job, or answers with the job that already stands for it (docs/deduplication.md): check
   * `job.deduplicated` and `job.outcome`. One round trip, through the SQL function `add_job()`.
   */
  async add(name: string, data: Data, opts?: AddOptions): Promise<Job<Data>> {
    const { tx, ...jobOpts } = checkOptions<AddOptions>(opts, 'opts', ADD_OPTION_KEYS)
    const req = toAddRequest(name, data, jobOpts, '', this.maxDataBytes)
    return inSpan(`add ${this.name}`, SpanKind.PRODUCER, producerAttributes(this.name, 1), async (span) => {
      req.traceContext = currentTraceContext()
      const execute = await this.executor(tx)
      // Without redis, an extend or a replace outside a caller's transaction answers once every cache heard of its end.
      const keyed = this.#cache
        ? keyedAdmission(this.#cache, tx !== undefined)
        : tx === undefined
          ? settledEndingAdmission
          : undefined
      const job = this.answer(await admitOne({ execute, schema: this.schema, queue: this.name, keyed }, req), req)
      span.setAttributes({ 'pgonce.outcome': job.outcome as string, 'pgonce.job.id': job.id })
      return job
    })
  }

  /**
   * Adds many jobs in one statement, all or nothing: any rejected item rolls back
   * the whole batch. Results come in input order; a repeated jobId or key inside
   * the batch is answered as if the items had been added one after another.
   */
  async addBulk(items: BulkItem<Data>[], options?: WriteOptions): Promise<Job<Data>[]> {
    const { tx } = checkOptions<WriteOptions>(options, 'options', ['tx'])
    const reqs = toAddRequests(items, this.maxDataBytes)
    return inSpan(`addBulk ${this.name}`, SpanKind.PRODUCER, producerAttributes(this.name, reqs.length), async () => {
      const traceContext = currentTraceContext()
      for (const r of reqs) r.traceContext = traceContext
      const execute = await this.executor(tx, 'options.tx')
      const ending = () =>
        reqs
          .filter((r) => r.dedupId !== null && (r.extend || r.replace))
          .map((r) => dedupFact(this.name, r.dedupId as string))
      const { rows, rejected } = await endingFacts(
        this.#cache,
        ending,
        tx !== undefined,
        () => admitMany({ execute, schema: this.schema, queue: this.name }, reqs),
        (answer) =>
          answer.rows?.some((r) => r.outcome === 'replaced' || r.outcome === 'extended')
            ? settleAfterCommit(execute, this.schema)
            : 0,
      )
      if (rejected !== null) this.answer(rejected.row, reqs[rejected.index] as AddRequest, `items[${rejected.index}]`)
      return (rows ?? []).map((row, i) => this.answer(row, reqs[i] as AddRequest))
    })
  }

  /** A job by its internal id, or null. */
  async getJob(id: string): Promise<Job<Data> | null> {
    checkJobIdRef(id, 'id')
    return this.readOne('get-job', [this.name, id])
  }

  /**
   * Resolves with job `id` once it has ended: `job.state` is `completed` (`job.result` holds what its handler returned),
   * `failed` or `cancelled` (`job.failedReason`, `job.stacktrace`) — an ended job resolves, whatever its end. Rejects
   * with `WaitForJobTimeoutError` after `timeoutMs`, `WaitForJobError` (`NOT_FOUND`) when this queue has no such job,
   * and the signal's reason when `signal` aborts. Whichever process ends the job (docs/queues.md, "Waiting for a job").
   */
  async waitForJob(id: string, options: WaitForJobOptions): Promise<Job<Data>> {
    checkJobIdRef(id, 'id')
    const { timeoutMs, signal } = checkWaitOptions(options)
    if (this.closed) throw new Error('pgonce: this Queue is closed')
    return new Job<Data>(await this.#waiters.wait(id, timeoutMs, signal), null, this)
  }

  /** The live generation of a custom jobId, else its newest terminal one, else null. */
  async getJobByCustomId(jobId: string): Promise<Job<Data> | null> {
    checkText(jobId, 'jobId')
    return this.readOne('get-job-by-custom-id', [jobId])
  }

  /** How many jobs of this queue are in each state (a due delayed job counts as waiting). */
  async getJobCounts(): Promise<JobCounts> {
    const counts = Object.fromEntries(JOB_STATES.map((s) => [s, 0])) as JobCounts
    const execute = await this.executor(undefined)
    for (const row of await execute<{ state: JobState; count: number }>(sqlFor('get-job-counts', this.schema), [
      this.name,
    ])) {
      counts[row.state] += row.count
    }
    return counts
  }

  /** The `job.id` owning a dedup key while the key is held, else null. */
  async getDeduplicationJobId(key: string): Promise<string | null> {
    checkText(key, 'key')
    const execute = await this.executor(undefined)
    const [row] = await execute<{ id: string }>(prepared('get-dedup-owner', this.schema), [this.name, key])
    return row?.id ?? null
  }

  /** Deletes a dedup key whoever owns it, so the next add proceeds; true if a held key was removed. */
  async removeDeduplicationKey(key: string, options?: WriteOptions): Promise<boolean> {
    const { tx } = checkOptions<WriteOptions>(options, 'options', ['tx'])
    checkText(key, 'key')
    return (await this.removeKey(key, null, tx)).held
  }

  /** @internal Used by `job.removeDeduplicationKey()`: deletes the key only if job `jobId` owns it; true if it was held. */
  async removeOwnedDeduplicationKey(key: string, jobId: string, options?: WriteOptions): Promise<boolean> {
    const { tx } = checkOptions<WriteOptions>(options, 'options', ['tx'])
    return (await this.removeKey(key, jobId, tx)).held
  }

  /**
   * Gives a failed job a fresh run: back to 'waiting' with its attempts reset.
   * Throws `RetryJobError` (nothing changed) when the job is missing or not failed,
   * when a newer live generation has its jobId, or another job holds its dedup key.
   */
  async retryJob(id: string, options?: WriteOptions): Promise<Job<Data>> {
    const { tx } = checkOptions<WriteOptions>(options, 'options', ['tx'])
    checkJobIdRef(id, 'id')
    const row = await retryFailedJob(await this.executor(tx, 'options.tx'), this.schema, this.name, id)
    return new Job<Data>(row, null, this)
  }

  /**
   * Makes a delayed job of this queue due now ('waiting'; a worker takes it at once, woken by a NOTIFY). Throws
   * `PromoteJobError` (nothing changed) when there is no such job (`NOT_FOUND`) or it is not delayed (`NOT_DELAYED`).
   */
  async promoteJob(id: string, options?: WriteOptions): Promise<Job<Data>> {
    const { tx } = checkOptions<WriteOptions>(options, 'options', ['tx'])
    checkJobIdRef(id, 'id')
    const row = await promoteDelayedJob(await this.executor(tx, 'options.tx'), this.schema, this.name, id)
    return new Job<Data>(row, null, this)
  }

  /**
   * Cancels a job of this queue: a pending one at once; a running one is asked to
   * stop (its `ctx.signal` aborts within a heartbeat, at once when its worker hears the NOTIFY) and ends `cancelled`
   * whatever its handler returns, unless it completed first. Its no-TTL key is released and the jobs waiting on it
   * fail. Says what it did.
   */
  async cancelJob(id: string, options?: WriteOptions): Promise<CancelOutcome> {
    const { tx } = checkOptions<WriteOptions>(options, 'options', ['tx'])
    checkJobIdRef(id, 'id')
    return cancelJob(await this.executor(tx, 'options.tx'), this.schema, this.name, id)
  }

  /**
   * Deletes a pending or finished job of this queue (its keys and dependency edges go with it; jobs waiting on a
   * pending one fail); true if it did, false if there was none. Throws `RemoveJobError` (nothing changed) for a job
   * whose handler is running.
   */
  async removeJob(id: string, options?: WriteOptions): Promise<boolean> {
    const { tx } = checkOptions<WriteOptions>(options, 'options', ['tx'])
    checkJobIdRef(id, 'id')
    const execute = await this.executor(tx, 'options.tx')
    const { removed } = await endingFacts(
      this.#cache,
      () => 'all',
      tx !== undefined,
      () => removeJob(execute, this.schema, this.name, id, tx !== undefined),
      (r) => r.settleMs,
    )
    return removed
  }

  /** A page of this queue's jobs, newest first: pass the last id as `after` for the next page. */
  async getJobs(options?: GetJobsOptions): Promise<Job<Data>[]> {
    const params = getJobsParams(this.name, options)
    const rows = await getJobs(await this.executor(undefined), this.schema, params)
    return rows.map((row) => new Job<Data>(row, null, this))
  }

  /**
   * Creates or replaces scheduler `id`: a job from `template` every `repeat.every` ms or on `repeat.pattern` (cron,
   * in `repeat.tz`). Every worker of this queue ticks it; one job per tick however many run (the tick's jobId is
   * `sched:<queue>:<id>:<tick ms>`). Ticks missed while no worker ran are not replayed: the first one after adds one job.
   * Replacing a scheduler restarts its schedule from now (database clock).
   */
  async upsertJobScheduler(
    id: string,
    repeat: RepeatOptions,
    template: SchedulerTemplate<Data>,
    options?: WriteOptions,
  ): Promise<void> {
    const { tx } = checkOptions<WriteOptions>(options, 'options', ['tx'])
    const s = checkScheduler(id, repeat, template, this.maxDataBytes)
    await upsertScheduler(await this.executor(tx, 'options.tx'), this.schema, this.name, s)
  }

  /** Deletes scheduler `id`; true if it existed. The jobs it added stay. */
  async removeJobScheduler(id: string, options?: WriteOptions): Promise<boolean> {
    const { tx } = checkOptions<WriteOptions>(options, 'options', ['tx'])
    checkText(id, 'id')
    return removeScheduler(await this.executor(tx, 'options.tx'), this.schema, this.name, id)
  }

  /** This queue's schedulers, by id. */
  async getJobSchedulers(): Promise<JobScheduler<Data>[]> {
    return listSchedulers<Data>(await this.executor(undefined), this.schema, this.name)
  }

  /**
   * Ends the pool pgonce opened (a pool you passed in is left open). Calls in flight get `statementTimeoutMs` + 2 s to
   * finish; then their connections are dropped (they fail), and close() returns within a second whatever the server does.
   */
  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    await closeWithin(
      this.#closeBoundMs,
      async () => {
        await this.#waiters.close()
        await this.#ready.settle()
        await this.#cache?.close()
        await this.#owned?.end()
      },
      () => this.#owned?.abandon(),
    )
  }

  private async removeKey(
    key: string,
    jobId: string | null,
    tx: Transactional | undefined,
  ): Promise<{ deleted: boolean; held: boolean }> {
    return removeDedupKey(
      await this.executor(tx, 'options.tx'),
      this.#cache,
      this.schema,
      this.name,
      key,
      jobId,
      tx !== undefined,
    )
  }

  private async readOne(query: string, values: unknown[]): Promise<Job<Data> | null> {
    const execute = await this.executor(undefined)
    const [row] = await execute<JobRow>(sqlFor(query, this.schema), values)
    return row ? new Job<Data>(row, null, this) : null
  }

  /** @internal Migrates on first use, then gives the caller's `tx` or pgonce's pool as an executor. */
  protected async executor(tx: Transactional | undefined, field = 'opts.tx'): Promise<Execute> {
    if (this.closed) throw new Error('pgonce: this Queue is closed')
    // Only an absent tx means "pgonce's pool": a null or wrong tx must not silently run outside the caller's transaction.
    const execute = executorFor(tx === undefined ? this.#pool : tx, field, this.named)
    await this.#ready.ensure()
    await this.#cache?.start()
    return execute
  }

  /** The Job of an admitted add (counted), or the error of a rejected one (counted as 'rejected'). */
  private answer(row: AdmissionRow, req: AddRequest, field = 'opts'): Job<Data> {
    if (row.error !== null) this.outcomes.increment('rejected')
    const admitted = admittedOrThrow(row, req, field)
    this.outcomes.increment(admitted.outcome)
    this.#logger.debug(
      { outcome: admitted.outcome, jobId: row.id, customId: row.job_id, key: req.dedupId },
      'pgonce: add decided',
    )
    return new Job<Data>(admitted, admitted.outcome, this)
  }
}
