// The Worker's options, their defaults, and their validation before any I/O.

import { type RedisOption, checkRedisOption } from '../cache/redis-client.js'
import { CONNECTION_OPTION_KEYS, type ConnectionOptions, MAX_TIMER_MS } from '../db/connection.js'
import { checkSchema } from '../db/identifiers.js'
import { type Logger, checkLogger } from '../logger.js'
import { MAX_DURATION_MS, checkBoolean, checkInteger, checkOptions, checkText, fail } from '../validate.js'
import { type BatchOptions, type ResolvedBatchOptions, checkBatchOptions } from './batch.js'

export interface WorkerOptions extends ConnectionOptions {
  /** Schema holding pgonce's tables. (Default: `'pgonce'`) */
  schema?: string
  /** Handlers running at once; with `batch`, batches running at once. (Default: 1) */
  concurrency?: number
  /**
   * Run a batch handler, `(jobs, ctx) => outcomes`, on up to `batch.size` jobs at once (docs/workers.md, "Batch
   * handlers"). Not with `batchSize`: `batch.size` is then the claim's size. (Default: none, one job per handler)
   */
  batch?: BatchOptions
  /**
   * Most jobs claimed by one statement. A worker claims only what it starts: its free slots, plus (fast handlers only)
   * the jobs its handlers finish within two claim round trips (docs/workers.md, "Fetching"). At most
   * `concurrency + batchSize` jobs are held at once, plus up to `batchSize` whose outcomes are being written.
   * (Default: 500)
   */
  batchSize?: number
  /** How long a claimed job is reserved for this worker without a heartbeat, in ms. (Default: 30000) */
  leaseMs?: number
  /** How often the leases of held jobs are extended, in ms; below `leaseMs`. (Default: `leaseMs / 3`) */
  heartbeatMs?: number
  /**
   * How long one run of a job without its own `timeoutMs` may take, in ms, by the database clock from its start: past
   * it, `ctx.signal` aborts with `JobTimeoutError` and the attempt fails (docs/workers.md#timeouts). (Default: none)
   */
  timeoutMs?: number
  /** Fallback poll for due jobs when no NOTIFY arrives, in ms. (Default: 2000) */
  pollIntervalMs?: number
  /** How long `close()` waits for running handlers before aborting their `ctx.signal`, in ms. (Default: 30000) */
  closeTimeoutMs?: number
  /** How often this worker runs housekeeping (`runMaintenance`: rescue expired leases, sweep expired keys, retention); 0 turns it off. (Default: 5000) */
  maintenanceIntervalMs?: number
  /** Delay before a job runs again when `ctx.runOnce` finds its key running elsewhere, in ms; the attempt is not counted. (Default: 1000) */
  retryLaterMs?: number
  /** Start processing in the constructor; if false, call `worker.run()`. (Default: true) */
  autorun?: boolean
  /** Run migrations before processing. (Default: true) */
  migrate?: boolean
  /** Size of the pool pgonce opens from `connectionString` (claims, completions, `ctx.transaction`). (Default: `min(concurrency, 20) + 3`) */
  poolSize?: number
  /**
   * Use named prepared statements. Set false behind a transaction-mode pooler such as PgBouncer before 1.21, which
   * cannot keep them between transactions. (Default: true)
   */
  preparedStatements?: boolean
  /**
   * Wake up by LISTEN/NOTIFY. `'shared'` (or true): on one LISTEN connection for every Worker of the process that
   * shares and reaches the same server and schema, whatever their queues (docs/scaling.md, "Connections"). `'own'`: on
   * a LISTEN connection of this Worker's own. false: poll only (every `pollIntervalMs`). (Default: `'shared'`)
   */
  listen?: boolean | 'shared' | 'own'
  /**
   * Where the LISTEN connection goes, when it must not go where the pool does: behind a transaction-mode PgBouncer,
   * point it at PostgreSQL itself (LISTEN and the idle slot are session state). (Default: the pool's connection)
   */
  listenConnectionString?: string
  /**
   * A pino-compatible logger. (Default: silent, except that errors with no `'error'` listener on the worker go to
   * stderr, at most one line per 10 s)
   */
  logger?: Logger
  /**
   * Redis for the pre-checks of `ctx.runOnce` (a done key answers `'duplicate-done'`) and `ctx.effect` (a recorded
   * key is skipped without opening a transaction), and for `job.removeDeduplicationKey()`'s invalidation
   * (docs/redis.md). Your ioredis client (never closed by pgonce) or a URL (pgonce opens ioredis and closes it).
   * (Default: none)
   */
  redis?: RedisOption
}

/** Every option with its default filled in. */
export type ResolvedWorkerOptions = Required<
  Omit<
    WorkerOptions,
    | 'connectionString'
    | 'pool'
    | 'connectTimeoutMs'
    | 'statementTimeoutMs'
    | 'listenConnectionString'
    | 'logger'
    | 'redis'
    | 'timeoutMs'
    | 'batch'
    | 'listen'
  >
> & {
  /** How the Worker listens: on the process's shared LISTEN connection, on its own, or not at all (polls). */
  listen: 'shared' | 'own' | false
  timeoutMs: number | null
  listenConnectionString: string | null
  logger: Logger
  /** True when the caller gave no logger. */
  silent: boolean
  redis: RedisOption | undefined
  /** The batch handler's options, null for a single-job handler. */
  batch: ResolvedBatchOptions | null
}

const OPTION_KEYS = [
  ...CONNECTION_OPTION_KEYS,
  'schema',
  'concurrency',
  'batch',
  'batchSize',
  'leaseMs',
  'heartbeatMs',
  'timeoutMs',
  'pollIntervalMs',
  'closeTimeoutMs',
  'maintenanceIntervalMs',
  'retryLaterMs',
  'autorun',
  'migrate',
  'poolSize',
  'preparedStatements',
  'listen',
  'listenConnectionString',
  'logger',
  'redis',
] as const

/** Checks every option (unknown keys rejected) and fills in the defaults. */
export function resolveWorkerOptions(options: unknown): {
  resolved: ResolvedWorkerOptions
  connection: ConnectionOptions
} {
  const o = checkOptions<WorkerOptions>(options, 'options', OPTION_KEYS)
  const int = (key: keyof WorkerOptions, fallback: number, min: number, max: number): number => {
    const value = o[key]
    return value === undefined ? fallback : checkInteger(value, `options.${key}`, min, max)
  }
  const concurrency = int('concurrency', 1, 1, 10_000)
  const leaseMs = int('leaseMs', 30_000, 500, MAX_DURATION_MS)
  const batch = checkBatchOptions(o.batch, 'options.batch')
  if (batch !== null && o.batchSize !== undefined)
    fail('CONFLICTING_OPTIONS', 'options.batchSize', 'not with options.batch: batch.size is the claim size')
  const resolved: ResolvedWorkerOptions = {
    schema: checkSchema(o.schema, 'options.schema'),
    concurrency,
    batchSize: int('batchSize', 500, 1, 10_000),
    leaseMs,
    heartbeatMs: int(
      'heartbeatMs',
      Math.min(Math.floor(leaseMs / 3), MAX_TIMER_MS),
      50,
      Math.min(leaseMs - 1, MAX_TIMER_MS),
    ),
    timeoutMs: o.timeoutMs === undefined ? null : checkInteger(o.timeoutMs, 'options.timeoutMs', 1, MAX_TIMER_MS),
    pollIntervalMs: int('pollIntervalMs', 2_000, 10, MAX_TIMER_MS),
    closeTimeoutMs: int('closeTimeoutMs', 30_000, 0, MAX_TIMER_MS),
    maintenanceIntervalMs: int('maintenanceIntervalMs', 5_000, 0, MAX_TIMER_MS),
    retryLaterMs: int('retryLaterMs', 1_000, 0, MAX_DURATION_MS),
    autorun: o.autorun === undefined ? true : checkBoolean(o.autorun, 'options.autorun'),
    migrate: o.migrate === undefined ? true : checkBoolean(o.migrate, 'options.migrate'),
    poolSize: int('poolSize', Math.min(concurrency, 20) + 3, 2, 1_000),
    preparedStatements:
      o.preparedStatements === undefined ? true : checkBoolean(o.preparedStatements, 'options.preparedStatements'),
    listen: checkListen(o.listen),
    listenConnectionString:
      o.listenConnectionString === undefined
        ? null
        : checkText(o.listenConnectionString, 'options.listenConnectionString', 4096),
    logger: checkLogger(o.logger, 'options.logger'),
    silent: o.logger === undefined,
    redis: checkRedisOption(o.redis, 'options.redis'),
    batch,
  }
  const { connectionString, pool, connectTimeoutMs, statementTimeoutMs } = o
  return { resolved, connection: { connectionString, pool, connectTimeoutMs, statementTimeoutMs } }
}

/** `options.listen`: 'shared' (also true, and the default), 'own', or false. */
function checkListen(value: unknown): 'shared' | 'own' | false {
  if (value === undefined || value === true || value === 'shared') return 'shared'
  if (value === 'own' || value === false) return value
  return fail('INVALID_TYPE', 'options.listen', `must be true, false, 'shared' or 'own', got ${typeof value}`)
}
