// Public exports of pgonce (DESIGN.md §11).

export { Queue } from './queue.js'
export type { QueueOptions, AddOptions, BulkItem, JobCounts, AddOutcomeCounts } from './queue.js'
export { Job } from './job.js'
export type { JobState, AddOutcome, Backoff } from './job.js'
export type { JobOptions, DeduplicationOptions } from './add-request.js'
export { migrate } from './migrate/runner.js'
export type { MigrateOptions } from './migrate/runner.js'
export { ValidationError, DeduplicationError, LeaseLostError } from './errors.js'
export type { ValidationCode, DeduplicationCode } from './errors.js'
export type { Logger } from './logger.js'
export type { Transactional } from './db/executor.js'
export type { ConnectionOptions } from './db/connection.js'
