// Queue: adds jobs (alone, in bulk, inside your transaction), looks them up, and manages dedup keys.

import type pg from 'pg'
import { admitMany, admitOne } from './admission/admit.js'
import type { AdmissionRow } from './admission/answers.js'
import { type AddRequest, type JobOptions, toAddRequest } from './admission/request.js'
import type { CacheOutcome } from './cache/breaker.js'
import { Cache, endingFacts } from './cache/cache.js'
import { keyedAdmission } from './cache/dedup-precheck.js'
import { dedupFact } from './cache/keys.js'
import { type RedisOption, checkRedisOption } from './cache/redis-client.js'
import { Counters } from './counters.js'
import type { ConnectionOptions } from './db/connection.js'
import { openPool } from './db/connection.js'
import { type Execute, type Transactional, executorFor } from './db/executor.js'
import { checkQueueName, checkSchema } from './db/identifiers.js'
import { prepared } from './db/prepared.js'
import { SchemaReady } from './migrate/schema-ready.js'
import { sqlFor } from './db/sql-files.js'
import { DeduplicationError, ValidationError } from './errors.js'
import { type AddOutcome, JOB_STATES, Job, type JobOwner, type JobRow, type JobState } from './job.js'
import { type Logger, checkLogger } from './logger.js'
import {
  type CancelOutcome, type GetJobsOptions, type RetentionSettings, cancelJob, getJobs, getJobsParams, getSettings, removeJob,
  retentionParams, setPaused, setRetention,
} from './queue-control.js'
import { retryFailedJob } from './retry-job.js'
import {
  type JobScheduler, type RepeatOptions, type SchedulerTemplate, checkScheduler, listSchedulers, removeScheduler, upsertScheduler,
} from './schedulers.js'
import { checkBoolean, checkInteger, checkJobIdRef, checkOptions, checkText, fail } from './validate.js'

export interface QueueOptions extends ConnectionOptions {
  /** Schema holding pgonce's tables. (Default: `'pgonce'`) */
  schema?: string
  /** A pino-compatible logger. (Default: silent) */
  logger?: Logger
  /** Run migrations on first use. (Default: true) */
  migrate?: boolean
  /** Largest accepted job data, in bytes of JSON. (Default: 1 MiB) */
  maxDataBytes?: number
  /** Size of the pool pgonce opens from `connectionString`. (Default: 10) */
  poolSize?: number
  /**
   * Use named prepared statements. Set false behind a transaction-mode pooler such as PgBouncer before 1.21, which
   * cannot keep them between transactions. (Default: true)
   */
  preparedStatements?: boolean
  /**
   * Redis for the hot pre-checks (docs/redis.md): a plain duplicate add of a key held with a TTL is answered from
   * Redis, without a Postgres round trip, with the owner as it was when cached (id, name, data exact; state and
   * attempts as of then). Your ioredis client (never closed by pgonce) or a URL (pgonce opens ioredis and closes it).
   * Every answer is what Postgres would give; Redis down, slow or flushed only means Postgres answers. (Default: none)
   */
  redis?: RedisOption
}

export interface AddOptions extends JobOptions {
  /** Run the add on your connection or inside your transaction: the job exists only if you commit. */
  tx?: Transactional
}

/** Where a write other than an add runs: your connection or transaction (it happens only if you commit). */
export interface WriteOptions {
  tx?: Transactional
}

export interface BulkItem<Data> {
  name: string
  data: Data
  opts?: JobOptions
}

export type JobCounts = Record<JobState, number>

/** The outcomes of adds, counted since the Queue was made. */
export type AddOutcomeCounts = Partial<Record<AddOutcome, number>>

const QUEUE_OPTION_KEYS = ['connectionString', 'pool', 'schema', 'logger', 'migrate', 'maxDataBytes', 'poolSize', 'preparedStatements', 'redis'] as const
const ADD_OPTION_KEYS = ['jobId', 'deduplication', 'delay', 'priority', 'attempts', 'backoff', 'dependsOn', 'tx'] as const
const BULK_ITEM_KEYS = ['name', 'data', 'opts'] as const

export class Queue<Data = unknown> implements JobOwner {
  readonly name: string
  readonly schema: string
  /** Outcomes of adds since this Queue was made, for metrics. */
  readonly outcomes = new Counters<AddOutcome>()
  /** How the Redis pre-checks went (hit, miss, fallback, breaker-open, unsynced), for metrics; empty without `redis`. */
  readonly cacheOutcomes: Counters<CacheOutcome>
  private readonly cache: Cache | undefined
  private readonly pool: pg.Pool
  private readonly ownsPool: boolean
  private readonly logger: Logger
  private readonly maxDataBytes: number
  private readonly named: boolean
  private readonly ready: SchemaReady
  private closed = false

  constructor(name: string, options: QueueOptions) {
    this.name = checkQueueName(name, 'name')
    const opts = checkOptions<QueueOptions>(options, 'options', QUEUE_OPTION_KEYS)
    this.schema = checkSchema(opts.schema, 'options.schema')
    this.maxDataBytes = opts.maxDataBytes === undefined ? 1 << 20 : checkInteger(opts.maxDataBytes, 'options.maxDataBytes', 1)
    const poolSize = opts.poolSize === undefined ? 10 : checkInteger(opts.poolSize, 'options.poolSize', 1, 1000)
    const migrateOnFirstUse = opts.migrate === undefined || checkBoolean(opts.migrate, 'options.migrate')
    this.named = opts.preparedStatements === undefined || checkBoolean(opts.preparedStatements, 'options.preparedStatements')
    this.logger = checkLogger(opts.logger, 'options.logger').child({ component: 'pgonce.queue', queue: this.name })
    const { pool, owned } = openPool(opts, this.logger, poolSize)
    this.pool = pool
    this.ownsPool = owned
    this.ready = new SchemaReady(pool, this.schema, this.logger, migrateOnFirstUse)
    const redis = checkRedisOption(opts.redis, 'options.redis')
    this.cache = redis === undefined ? undefined : new Cache({ redis, pool, schema: this.schema, named: this.named, logger: this.logger })
    this.cacheOutcomes = this.cache?.outcomes ?? new Counters<CacheOutcome>()
  }

  /**
   * Adds a job, or answers with the job that already stands for it (docs/deduplication.md): check
   * `job.deduplicated` and `job.outcome`. One round trip, through the SQL function `add_job()`.
   */
  async add(name: string, data: Data, opts?: AddOptions): Promise<Job<Data>> {
    const { tx, ...jobOpts } = checkOptions<AddOptions>(opts, 'opts', ADD_OPTION_KEYS)
    const req = toAddRequest(name, data, jobOpts, '', this.maxDataBytes)
    const execute = await this.executor(tx)
    const keyed = this.cache && keyedAdmission(this.cache, tx !== undefined)
    return this.answer(await admitOne({ execute, schema: this.schema, queue: this.name, keyed }, req), req)
  }

  /**
   * Adds many jobs in one statement, all or nothing: any rejected item rolls back
   * the whole batch. Results come in input order; a repeated jobId or key inside
   * the batch is answered as if the items had been added one after another.
   */
  async addBulk(items: BulkItem<Data>[], options?: { tx?: Transactional }): Promise<Job<Data>[]> {
    const { tx } = checkOptions<{ tx: Transactional }>(options, 'options', ['tx'])
    if (!Array.isArray(items)) fail('INVALID_TYPE', 'items', 'must be an array')
    const reqs: AddRequest[] = new Array(items.length)
    for (let i = 0; i < items.length; i++) {
      const field = `items[${i}]`
      const it = checkOptions<BulkItem<Data>>(items[i], field, BULK_ITEM_KEYS)
      reqs[i] = toAddRequest(it.name, it.data, it.opts, field, this.maxDataBytes)
    }
    const execute = await this.executor(tx, 'options.tx')
    const ending = () => reqs.filter((r) => r.dedupId !== null && (r.extend || r.replace)).map((r) => dedupFact(this.name, r.dedupId as string))
    const { rows, rejected } = await endingFacts(this.cache, ending, tx !== undefined,
      () => admitMany({ execute, schema: this.schema, queue: this.name }, reqs))
    if (rejected !== null) this.answer(rejected.row, reqs[rejected.index] as AddRequest, `items[${rejected.index}]`)
    return (rows ?? []).map((row, i) => this.answer(row, reqs[i] as AddRequest))
  }

  /** A job by its internal id, or null. */
  async getJob(id: string): Promise<Job<Data> | null> {
    checkJobIdRef(id, 'id')
    return this.readOne('get-job', [this.name, id])
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
    for (const row of await execute<{ state: JobState; count: number }>(sqlFor('get-job-counts', this.schema), [this.name])) {
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

  /** @internal Used by `job.removeDeduplicationKey()`: deletes the key only if job `jobId` owns it. */
  async removeOwnedDeduplicationKey(key: string, jobId: string, options?: WriteOptions): Promise<boolean> {
    const { tx } = checkOptions<WriteOptions>(options, 'options', ['tx'])
    return (await this.removeKey(key, jobId, tx)).deleted
  }

  /**
   * Gives a failed job a fresh run: back to 'waiting' with its attempts reset.
   * Throws `RetryJobError` (nothing changed) when the job is missing or not failed,
   * when a newer live generation has its jobId, or another job holds its dedup key.
   */
  async retryJob(id: string, options?: WriteOptions): Promise<Job<Data>> {
    const { tx } = checkOptions<WriteOptions>(options, 'options', ['tx'])
    checkJobIdRef(id, 'id')
    return new Job<Data>(await retryFailedJob(await this.executor(tx, 'options.tx'), this.schema, this.name, id), null, this)
  }

  /**
   * Cancels a job of this queue: a pending one (also one a worker claimed ahead) at once; a running one is asked to
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
    return endingFacts(this.cache, () => 'all', tx !== undefined, () => removeJob(execute, this.schema, this.name, id))
  }

  /** A page of this queue's jobs, newest first: pass the last id as `after` for the next page. */
  async getJobs(options?: GetJobsOptions): Promise<Job<Data>[]> {
    const params = getJobsParams(this.name, options)
    const rows = await getJobs(await this.executor(undefined), this.schema, params)
    return rows.map((row) => new Job<Data>(row, null, this))
  }

  /** Stops every worker of this queue from claiming (they finish what they hold); adds are still accepted and deduplicated. */
  async pause(options?: WriteOptions): Promise<void> {
    const { tx } = checkOptions<WriteOptions>(options, 'options', ['tx'])
    await setPaused(await this.executor(tx, 'options.tx'), this.schema, this.name, true)
  }

  /** Lets the workers of this queue claim again (and wakes the idle ones). */
  async resume(options?: WriteOptions): Promise<void> {
    const { tx } = checkOptions<WriteOptions>(options, 'options', ['tx'])
    await setPaused(await this.executor(tx, 'options.tx'), this.schema, this.name, false)
  }

  async isPaused(): Promise<boolean> {
    return (await getSettings(await this.executor(undefined), this.schema, this.name)).paused
  }

  /** Sets how long this queue's finished jobs are kept (stored in Postgres; housekeeping prunes by it). */
  async setRetention(settings: RetentionSettings): Promise<void> {
    const params = retentionParams(this.name, settings)
    await setRetention(await this.executor(undefined), this.schema, params)
  }

  /** This queue's retention, with the defaults filled in. */
  async getRetention(): Promise<Required<{ [K in keyof RetentionSettings]: number | null }>> {
    const s = await getSettings(await this.executor(undefined), this.schema, this.name)
    return { completedMs: s.completedRetentionMs, failedMs: s.failedRetentionMs, maxCompleted: s.maxCompleted }
  }

  /**
   * Creates or replaces scheduler `id`: a job from `template` every `repeat.every` ms or on `repeat.pattern` (cron,
   * in `repeat.tz`). Every worker of this queue ticks it; one job per tick however many run (the tick's jobId is
   * `sched:<id>:<tick ms>`). Ticks missed while no worker ran are not replayed: the first one after adds one job.
   * Replacing a scheduler restarts its schedule from now (database clock).
   */
  async upsertJobScheduler(id: string, repeat: RepeatOptions, template: SchedulerTemplate<Data>): Promise<void> {
    const s = checkScheduler(id, repeat, template, this.maxDataBytes)
    await upsertScheduler(await this.executor(undefined), this.schema, this.name, s)
  }

  /** Deletes scheduler `id`; true if it existed. The jobs it added stay. */
  async removeJobScheduler(id: string): Promise<boolean> {
    checkText(id, 'id')
    return removeScheduler(await this.executor(undefined), this.schema, this.name, id)
  }

  /** This queue's schedulers, by id. */
  async getJobSchedulers(): Promise<JobScheduler<Data>[]> {
    return listSchedulers<Data>(await this.executor(undefined), this.schema, this.name)
  }

  /** Ends the pool pgonce opened (a pool you passed in is left open). */
  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    await this.ready.settle()
    await this.cache?.close()
    if (this.ownsPool) await this.pool.end()
  }

  private async removeKey(key: string, jobId: string | null, tx: Transactional | undefined): Promise<{ deleted: boolean; held: boolean }> {
    const execute = await this.executor(tx, 'options.tx')
    const [row] = await endingFacts(this.cache, () => [dedupFact(this.name, key)], tx !== undefined,
      () => execute<{ deleted: boolean; held: boolean }>(sqlFor('remove-dedup-key', this.schema), [this.name, key, jobId]))
    return row as { deleted: boolean; held: boolean }
  }

  private async readOne(query: string, values: unknown[]): Promise<Job<Data> | null> {
    const execute = await this.executor(undefined)
    const [row] = await execute<JobRow>(sqlFor(query, this.schema), values)
    return row ? new Job<Data>(row, null, this) : null
  }

  /** Migrates on first use, then gives the caller's `tx` or pgonce's pool as an executor. */
  protected async executor(tx: Transactional | undefined, field = 'opts.tx'): Promise<Execute> {
    if (this.closed) throw new Error('pgonce: this Queue is closed')
    // Only an absent tx means "pgonce's pool": a null or wrong tx must not silently run outside the caller's transaction.
    const execute = executorFor(tx === undefined ? this.pool : tx, field, this.named)
    await this.ready.ensure()
    await this.cache?.start()
    return execute
  }

  private answer(row: AdmissionRow, req: AddRequest, field = 'opts'): Job<Data> {
    if (row.error !== null) {
      const owner = row.id ?? null
      if (row.error === 'DEPENDENCY_NOT_FOUND') {
        throw new ValidationError('DEPENDENCY_NOT_FOUND', `${field}.dependsOn`, 'names a job that does not exist')
      }
      const key = req.dedupId ?? ''
      const message = row.error === 'EXTEND_NOT_PENDING'
        ? `Duplicate unique_key (extended TTL): key '${key}' is held by job ${owner}, which is no longer pending`
        : `cannot replace job ${owner} of key '${key}': a live job depends on it`
      throw new DeduplicationError(row.error as DeduplicationError['code'], key, owner, message)
    }
    const outcome = row.outcome as AddOutcome
    this.outcomes.increment(outcome)
    this.logger.debug({ outcome, jobId: row.id, customId: row.job_id, key: req.dedupId }, 'pgonce: add decided')
    return new Job<Data>(row, outcome, this)
  }
}
