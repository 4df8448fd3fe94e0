// defineQueue: one typed definition of a queue (its job names, their data and results) that its Queue and Worker share.

import type { JobOptions } from './admission/request.js'
import type { Job } from './job.js'
import { checkQueueName } from './db/identifiers.js'
import { Queue } from './queue.js'
import type { AddOptions, QueueOptions, WriteOptions } from './queue-options.js'
import type { GetJobsOptions } from './queue-control.js'
import type { JobScheduler, RepeatOptions } from './schedulers.js'
import type { WaitForJobOptions } from './wait-for-job.js'
import { fail, isPlainObject } from './validate.js'
import type { BatchContext, BatchOptions, BatchReturn } from './worker/batch.js'
import type { JobContext } from './worker/job-context.js'
import type { WorkerOptions } from './worker/options.js'
import { Worker } from './worker/worker.js'

/** A queue's jobs: each job name with the type of its data. */
export type JobTypes = Record<string, unknown>

/** What the handler of each job name returns (stored as `job.result`); a name left out returns `unknown`. */
export type ResultTypes<Jobs extends JobTypes> = { [N in keyof Jobs]?: unknown }

/** The job names of a definition. */
export type JobName<Jobs extends JobTypes> = keyof Jobs & string

/** What the handler of job name `N` returns. */
export type ResultOf<
  Jobs extends JobTypes,
  Results extends ResultTypes<Jobs>,
  N extends JobName<Jobs>,
> = N extends keyof Results ? Exclude<Results[N], undefined> : unknown

/** A job of name `N`: its data, result and name typed. */
export type JobNamed<Jobs extends JobTypes, Results extends ResultTypes<Jobs>, N extends JobName<Jobs>> = Job<
  Jobs[N],
  ResultOf<Jobs, Results, N>,
  N
>

/** Any job of the queue: a union by name, so that `switch (job.name)` narrows `job.data` and `job.result`. */
export type AnyJob<Jobs extends JobTypes, Results extends ResultTypes<Jobs>> = {
  [N in JobName<Jobs>]: JobNamed<Jobs, Results, N>
}[JobName<Jobs>]

/** Any job's data, and any job's result. */
export type AnyData<Jobs extends JobTypes> = Jobs[JobName<Jobs>]
export type AnyResult<Jobs extends JobTypes, Results extends ResultTypes<Jobs>> = {
  [N in JobName<Jobs>]: ResultOf<Jobs, Results, N>
}[JobName<Jobs>]

/** An item of `addBulk`: a name of the queue with that name's data. */
export type TypedBulkItem<Jobs extends JobTypes> = {
  [N in JobName<Jobs>]: { name: N; data: Jobs[N]; opts?: JobOptions }
}[JobName<Jobs>]

/** A scheduler's template: a name of the queue with that name's data. */
export type TypedSchedulerTemplate<Jobs extends JobTypes> = {
  [N in JobName<Jobs>]: { name: N; data?: Jobs[N]; opts?: Omit<JobOptions, 'jobId' | 'dependsOn'> }
}[JobName<Jobs>]

/** The methods of a Queue that take or give jobs, typed by the definition; the rest are the Queue's own. */
type JobMethods = 'add' | 'addBulk' | 'getJob' | 'getJobByCustomId' | 'getJobs' | 'retryJob' | 'promoteJob'
type TypedMethods = JobMethods | 'waitForJob' | 'upsertJobScheduler' | 'getJobSchedulers'

/** A Queue made from a definition (`def.queue(options)`): the same object as `new Queue(def.name, options)`, typed. */
export interface TypedQueue<Jobs extends JobTypes, Results extends ResultTypes<Jobs> = object> extends Omit<
  Queue<AnyData<Jobs>>,
  TypedMethods
> {
  add<N extends JobName<Jobs>>(name: N, data: Jobs[N], opts?: AddOptions): Promise<JobNamed<Jobs, Results, N>>
  addBulk(items: TypedBulkItem<Jobs>[], options?: WriteOptions): Promise<AnyJob<Jobs, Results>[]>
  getJob(id: string): Promise<AnyJob<Jobs, Results> | null>
  getJobByCustomId(jobId: string): Promise<AnyJob<Jobs, Results> | null>
  getJobs(options?: GetJobsOptions): Promise<AnyJob<Jobs, Results>[]>
  retryJob(id: string, options?: WriteOptions): Promise<AnyJob<Jobs, Results>>
  promoteJob(id: string, options?: WriteOptions): Promise<AnyJob<Jobs, Results>>
  /** `Queue.waitForJob`, its answer typed: narrow it by `job.name` (and `job.state`) to read a typed `job.result`. */
  waitForJob(id: string, options: WaitForJobOptions): Promise<AnyJob<Jobs, Results>>
  upsertJobScheduler(
    id: string,
    repeat: RepeatOptions,
    template: TypedSchedulerTemplate<Jobs>,
    options?: WriteOptions,
  ): Promise<void>
  getJobSchedulers(): Promise<JobScheduler<AnyData<Jobs>>[]>
}

/** One handler for every job of the queue: it gets the union by name and may return any name's result. */
export type TypedHandler<Jobs extends JobTypes, Results extends ResultTypes<Jobs>> = (
  job: AnyJob<Jobs, Results>,
  ctx: JobContext,
) => AnyResult<Jobs, Results> | Promise<AnyResult<Jobs, Results>>

/** A handler per job name, each returning its name's result: a name left out, or one the queue lacks, fails to compile. */
export type HandlersByName<Jobs extends JobTypes, Results extends ResultTypes<Jobs>> = {
  [N in JobName<Jobs>]: (
    job: JobNamed<Jobs, Results, N>,
    ctx: JobContext,
  ) => ResultOf<Jobs, Results, N> | Promise<ResultOf<Jobs, Results, N>>
}

/** A batch handler for the queue's jobs (docs/workers.md, "Batch handlers"): the jobs typed as a union by name. */
export type TypedBatchHandler<Jobs extends JobTypes, Results extends ResultTypes<Jobs>> = (
  jobs: AnyJob<Jobs, Results>[],
  ctx: BatchContext<AnyData<Jobs>>,
) => BatchReturn<AnyResult<Jobs, Results>> | Promise<BatchReturn<AnyResult<Jobs, Results>>>

/** A Worker made from a definition (`def.worker(handler, options)`), typed by it. */
export type TypedWorker<Jobs extends JobTypes, Results extends ResultTypes<Jobs>> = Worker<
  AnyData<Jobs>,
  AnyResult<Jobs, Results>
>

/** The definition of a queue, shared by its producers and consumers (docs/queues.md, "Typed queues"). */
export interface QueueDefinition<Jobs extends JobTypes, Results extends ResultTypes<Jobs> = object> {
  readonly name: string
  /** A Queue of this definition's name, typed by it. */
  queue(options: QueueOptions): TypedQueue<Jobs, Results>
  /** A Worker of this definition's name, typed by it: one handler for every job, or one per job name. */
  worker(
    handler: TypedHandler<Jobs, Results> | HandlersByName<Jobs, Results>,
    options: WorkerOptions,
  ): TypedWorker<Jobs, Results>
  /** A Worker of this definition's name with a batch handler (`options.batch` required), typed by it. */
  batchWorker(
    handler: TypedBatchHandler<Jobs, Results>,
    options: WorkerOptions & { batch: BatchOptions },
  ): TypedWorker<Jobs, Results>
}

/**
 * Defines queue `name` with its job names, the data of each (`Jobs`) and, optionally, what each one's handler returns
 * (`Results`). The Queue and the Worker made from it agree at compile time: a name the queue lacks, data of another
 * name, or a handler that reads the wrong fields do not compile. Types only: nothing is checked at run time that an
 * untyped Queue would not check (a job added under another name, by SQL or an untyped Queue, still reaches the worker).
 *
 * ### Examples
 * ```ts
 * import { defineQueue } from 'pgonce'
 * type Push = { userId: number; text: string }
 * type Digest = { userId: number; since: string }
 * export const notifications = defineQueue<{ push: Push; digest: Digest }, { push: { sent: boolean } }>('notifications')
 *
 * const queue = notifications.queue({ connectionString: process.env.DATABASE_URL })
 * const job = await queue.add('push', { userId: 7, text: 'hi' })
 * const ended = await queue.waitForJob(job.id, { timeoutMs: 10_000 })
 * if (ended.name === 'push' && ended.state === 'completed') console.log(ended.result?.sent)
 *
 * const worker = notifications.worker(
 *   { push: async (job) => ({ sent: await send(job.data.userId, job.data.text) }), digest: async (job) => digest(job.data) },
 *   { connectionString: process.env.DATABASE_URL },
 * )
 * ```
 */
export function defineQueue<Jobs extends JobTypes, Results extends ResultTypes<Jobs> = object>(
  name: string,
): QueueDefinition<Jobs, Results> {
  const queueName = checkQueueName(name, 'name')
  return Object.freeze({
    name: queueName,
    queue: (options: QueueOptions) => new Queue(queueName, options) as unknown as TypedQueue<Jobs, Results>,
    worker: (handler: TypedHandler<Jobs, Results> | HandlersByName<Jobs, Results>, options: WorkerOptions) =>
      new Worker(queueName, dispatcher(handler), options) as unknown as TypedWorker<Jobs, Results>,
    batchWorker: (handler: TypedBatchHandler<Jobs, Results>, options: WorkerOptions & { batch: BatchOptions }) =>
      new Worker(queueName, handler as never, options) as unknown as TypedWorker<Jobs, Results>,
  })
}

type AnyHandler = (job: Job, ctx: JobContext) => unknown

/** The one handler a Worker runs: the function given, or the handler of the job's name (checked before any I/O). */
function dispatcher(handler: unknown): AnyHandler {
  if (typeof handler === 'function') return handler as AnyHandler
  if (!isPlainObject(handler))
    fail('INVALID_TYPE', 'handler', 'must be a function or an object of functions by job name')
  const byName = new Map<string, AnyHandler>()
  for (const [name, h] of Object.entries(handler)) {
    if (typeof h !== 'function') fail('INVALID_TYPE', `handler.${name}`, 'must be a function')
    byName.set(name, h as AnyHandler)
  }
  return (job, ctx) => {
    const h = byName.get(job.name)
    // A job added under another name (by SQL, or by an untyped Queue): its attempt fails, saying so.
    if (h === undefined) throw new Error(`pgonce: queue ${job.queue} has no handler for job name '${job.name}'`)
    return h(job, ctx)
  }
}
