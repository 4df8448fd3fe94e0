// The options of a Queue and of its calls, and their checks.

import { JOB_OPTION_KEYS, type JobOptions } from './admission/request.js'
import { type RedisOption, checkRedisOption } from './cache/redis-client.js'
import { CONNECTION_OPTION_KEYS, type ConnectionOptions } from './db/connection.js'
import type { Transactional } from './db/executor.js'
import { checkSchema } from './db/identifiers.js'
import type { AddOutcome, JobState } from './job.js'
import { type Logger, checkLogger } from './logger.js'
import { checkBoolean, checkInteger, checkOptions, checkText } from './validate.js'

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
  /**
   * Where `queue.waitForJob`'s LISTEN connection goes, when it must not go where the pool does: behind a
   * transaction-mode PgBouncer, point it at PostgreSQL itself (LISTEN is session state; without it the waits poll
   * every second). (Default: the pool's connection)
   */
  listenConnectionString?: string
  /**
   * How often `queue.waitForJob` reads the jobs it waits for whatever LISTEN hears, in ms (±25 % jitter): the longest a
   * NOTIFY lost with a dropped connection, or never heard behind a pooler, delays a wait. (Default: 1000)
   */
  waitPollIntervalMs?: number
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

const QUEUE_OPTION_KEYS = [
  ...CONNECTION_OPTION_KEYS,
  'schema',
  'logger',
  'migrate',
  'maxDataBytes',
  'poolSize',
  'preparedStatements',
  'redis',
  'listenConnectionString',
  'waitPollIntervalMs',
] as const

/** A Queue's options, checked, with the defaults filled in. */
export interface ResolvedQueueOptions {
  connection: ConnectionOptions
  schema: string
  maxDataBytes: number
  poolSize: number
  migrate: boolean
  named: boolean
  logger: Logger
  redis: RedisOption | undefined
  listenConnectionString: string | null
  waitPollIntervalMs: number
}

/** Checks a Queue's options (before any I/O) and fills in the defaults. */
export function resolveQueueOptions(options: unknown, queue: string): ResolvedQueueOptions {
  const opts = checkOptions<QueueOptions>(options, 'options', QUEUE_OPTION_KEYS)
  return {
    connection: opts,
    schema: checkSchema(opts.schema, 'options.schema'),
    maxDataBytes:
      opts.maxDataBytes === undefined ? 1 << 20 : checkInteger(opts.maxDataBytes, 'options.maxDataBytes', 1),
    poolSize: opts.poolSize === undefined ? 10 : checkInteger(opts.poolSize, 'options.poolSize', 1, 1000),
    migrate: opts.migrate === undefined || checkBoolean(opts.migrate, 'options.migrate'),
    named: opts.preparedStatements === undefined || checkBoolean(opts.preparedStatements, 'options.preparedStatements'),
    logger: checkLogger(opts.logger, 'options.logger').child({ component: 'pgonce.queue', queue }),
    redis: checkRedisOption(opts.redis, 'options.redis'),
    listenConnectionString:
      opts.listenConnectionString === undefined
        ? null
        : checkText(opts.listenConnectionString, 'options.listenConnectionString', 4096),
    waitPollIntervalMs:
      opts.waitPollIntervalMs === undefined
        ? 1_000
        : checkInteger(opts.waitPollIntervalMs, 'options.waitPollIntervalMs', 10, 3_600_000),
  }
}
export const ADD_OPTION_KEYS = [...JOB_OPTION_KEYS, 'tx'] as const
