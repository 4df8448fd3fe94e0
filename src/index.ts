// Public exports of pgonce: everything a user imports (docs/architecture.md lists what each file owns).

export { Queue } from './queue.js'
export type { QueueOptions, AddOptions, BulkItem, JobCounts, AddOutcomeCounts, WriteOptions } from './queue.js'
export type { WaitForJobOptions } from './wait-for-job.js'
export { WaitForJobError, WaitForJobTimeoutError } from './errors.js'
export type { WaitForJobCode } from './errors.js'
export { Job } from './job.js'
export { defineQueue } from './define-queue.js'
export type {
  QueueDefinition,
  TypedQueue,
  TypedWorker,
  TypedHandler,
  TypedBatchHandler,
  HandlersByName,
  JobTypes,
  ResultTypes,
  JobName,
  JobNamed,
  AnyJob,
  ResultOf,
  TypedBulkItem,
  TypedSchedulerTemplate,
} from './define-queue.js'
export type { JobState, AddOutcome, Backoff, JobJson } from './job.js'
export type { JobOptions, DeduplicationOptions, GroupOptions } from './admission/request.js'
export { migrate } from './migrate/runner.js'
export type { MigrateOptions } from './migrate/runner.js'
export {
  ValidationError,
  DeduplicationError,
  LeaseLostError,
  QueryTimeoutError,
  JobCancelledError,
  JobTimeoutError,
  SchemaNewerError,
} from './errors.js'
export { SchemaHistoryError } from './errors.js'
export { DatabaseTimeoutError, SetupError } from './errors.js'
export type { ValidationCode, QueryTimeoutCode, DeduplicationCode } from './errors.js'
export type { DatabaseTimeoutCode, SetupCode } from './errors.js'
export type { Logger } from './logger.js'
export type { Transactional } from './db/executor.js'
export { fromDrizzle, fromKnex, fromPostgresJs, fromPrisma, fromTypeORM } from './db/adapters/index.js'
export type {
  TransactionAdapter,
  DrizzleLike,
  KnexLike,
  PostgresJsLike,
  PrismaLike,
  TypeORMLike,
} from './db/adapters/index.js'
export type { RedisOption, RedisLike } from './cache/redis-client.js'
export type { CacheOutcome } from './cache/breaker.js'
export type { ConnectionOptions } from './db/connection.js'
export { Effects } from './effects.js'
export type { EffectsOptions, RunOnceOptions, RunOnceOutcome, EffectOutcome } from './effects.js'
export { Worker } from './worker/worker.js'
export type { Handler, WorkerEvents } from './worker/worker.js'
export type { BatchContext, BatchHandler, BatchOptions, BatchOutcome } from './worker/worker.js'
export type { WorkerOptions } from './worker/options.js'
export type { JobContext } from './worker/job-context.js'
export { RetryLaterError } from './errors.js'
export { runMaintenance } from './maintenance.js'
export type { MaintenanceOptions, MaintenanceResult } from './maintenance.js'
export { RetryJobError } from './retry-job.js'
export { PromoteJobError } from './promote-job.js'
export { RemoveJobError } from './queue-control.js'
export type { GroupLimits, Limits, QueueLimits, RateLimit } from './limits.js'
export type { CancelOutcome, GetJobsOptions, RetentionSettings, RemoveJobCode } from './queue-control.js'
export type { RetryJobCode } from './retry-job.js'
export type { PromoteJobCode } from './promote-job.js'
export type { JobScheduler, RepeatOptions, SchedulerTemplate } from './schedulers.js'
