// The real side of the admission property test: one queue per run, its entry points, and the comparison with the model.
//
// Answers and rows are translated into model terms (real job.id -> model id, jobId without the run's prefix) and
// compared with one toEqual each, so that a failure prints a diff plus the run's trace of resolved steps.

import type pg from 'pg'
import { expect } from 'vitest'
import {
  type BulkItem,
  DeduplicationError,
  type Job,
  type JobOptions,
  Queue,
  ValidationError,
} from '../../src/index.js'
import type { AdmissionModel, Answer, BatchAnswer, JobAnswer, ModelAdd, Payload } from './admission-model.js'
import { type SqlAdmission, type SqlBulkItem, type SqlRunner, sqlAddJob, sqlAddJobs } from './admission-sql.js'

/** A job id that no job will ever have (the sequence of a test schema never gets near it). */
const MISSING_JOB_ID = '999999999999'
/** A runAt long past, as each path takes it: a timestamptz for add_job(), epoch ms for the others. */
const PAST = '2001-01-01T00:00:00Z'
const PAST_MS = Date.parse(PAST)

export interface RealJob {
  outcome: string | null
  /** null where the path does not say (the SQL functions). */
  deduplicated: boolean | null
  id: string
  name: string
  state: string
  data: unknown
  jobId: string | null
  key: string | null
  priority: number
  maxAttempts: number
  attempts: number
}

export interface RealRejection {
  kind: 'rejected'
  code: string
  /** The owner's job.id; 'unknown' where the path does not say (add_job() raising PO001). */
  owner: string | null
  /** The rejected item of a batch; 'unknown' where the path does not say (a DeduplicationError from addBulk). */
  index: number | null | 'unknown'
}

export type RealAnswer = ({ kind: 'job' } & RealJob) | RealRejection
export type RealBatch = { kind: 'batch'; answers: RealJob[] } | RealRejection

interface IdMaps {
  toModel: Map<string, number>
  toReal: Map<number, string>
}

export interface WorldOptions {
  pool: pg.Pool
  schema: string
  /** The queue of this run, e.g. `q7`. */
  queue: string
  /** Prefix of this run's jobIds (they are unique across queues, so runs must not share them). */
  jobIdPrefix: string
  /** The key space and jobId space of the run, looked up by every row check. */
  keys: readonly string[]
  jobIds: readonly string[]
}

export class World {
  readonly queue: Queue<Payload>
  readonly pool: pg.Pool
  readonly schema: string
  /** Lock tokens of the jobs this run claimed, by job.id. */
  readonly tokens = new Map<string, string>()
  private ids: IdMaps = { toModel: new Map(), toReal: new Map() }
  private readonly trace: string[] = []
  private lastData = 0
  /** Steps run so far, for the periodic row check. */
  steps = 0

  constructor(private readonly o: WorldOptions) {
    this.pool = o.pool
    this.schema = o.schema
    this.queue = new Queue<Payload>(o.queue, { pool: o.pool, schema: o.schema, migrate: false })
  }

  get queueName(): string {
    return this.o.queue
  }

  /** The data of the next add: a number no other add of the run carries. */
  nextPayload(): Payload {
    return { n: ++this.lastData }
  }

  /** Records a resolved step, for the failure message. */
  log(line: string): void {
    this.trace.push(line)
  }

  snapshotIds(): IdMaps {
    return { toModel: new Map(this.ids.toModel), toReal: new Map(this.ids.toReal) }
  }

  restoreIds(ids: IdMaps): void {
    this.ids = { toModel: new Map(ids.toModel), toReal: new Map(ids.toReal) }
  }

  realId(modelId: number): string {
    const id = this.ids.toReal.get(modelId)
    if (id === undefined) throw new Error(`no real job for model job #${modelId}`)
    return id
  }

  // --- entry points -------------------------------------------------------------------------------------------

  async add(req: ModelAdd, tx?: pg.PoolClient): Promise<RealAnswer> {
    const opts = this.jobOptions(req)
    try {
      const job = await this.queue.add(req.name, req.data, tx === undefined ? opts : { ...opts, tx })
      return { kind: 'job', ...this.fromJob(job) }
    } catch (err) {
      return this.rejection(err)
    }
  }

  async addBulk(reqs: readonly ModelAdd[], tx?: pg.PoolClient): Promise<RealBatch> {
    const items: BulkItem<Payload>[] = reqs.map((r) => ({ name: r.name, data: r.data, opts: this.jobOptions(r) }))
    try {
      const jobs = await this.queue.addBulk(items, tx === undefined ? undefined : { tx })
      return { kind: 'batch', answers: jobs.map((j) => this.fromJob(j)) }
    } catch (err) {
      return this.rejection(err)
    }
  }

  async sqlAdd(req: ModelAdd, raiseRejection: boolean | undefined, runner: SqlRunner = this.pool): Promise<RealAnswer> {
    const a = await sqlAddJob(runner, this.schema, {
      queue: this.o.queue,
      name: req.name,
      data: req.data,
      jobId: this.jobIdOf(req),
      dedupId: req.dedup?.id,
      dedupTtlMs: req.dedup?.ttl,
      dedupExtend: req.dedup?.extend,
      dedupReplace: req.dedup?.replace,
      delayMs: req.delay,
      runAt: req.runAtPast ? PAST : undefined,
      timeoutMs: req.timeoutMs,
      priority: req.priority,
      maxAttempts: req.attempts,
      dependsOn: this.dependsOn(req),
      raiseRejection,
    })
    return this.fromSql(a)
  }

  async sqlAddBulk(reqs: readonly ModelAdd[], runner: SqlRunner = this.pool): Promise<RealBatch> {
    const items = reqs.map((r): SqlBulkItem =>
      definedOnly({
        name: r.name,
        data: r.data,
        jobId: this.jobIdOf(r),
        dedupId: r.dedup?.id,
        dedupTtlMs: r.dedup?.ttl,
        extend: r.dedup?.extend,
        replace: r.dedup?.replace,
        delayMs: r.delay,
        runAt: r.runAtPast ? PAST_MS : undefined,
        timeoutMs: r.timeoutMs,
        priority: r.priority,
        attempts: r.attempts,
        dependsOn: this.dependsOn(r),
      }),
    )
    const rows = await sqlAddJobs(runner, this.schema, this.o.queue, items)
    const rejected = rows.find((r) => r.error !== null)
    if (rejected !== undefined) {
      const r = this.fromSql(rejected)
      return r.kind === 'rejected'
        ? r
        : { kind: 'rejected', code: 'row with an error and a job', owner: r.id, index: null }
    }
    const answers: RealJob[] = rows.map((row) => {
      const r = this.fromSql(row)
      if (r.kind !== 'job') throw new Error('add_jobs() answered a job row without a job')
      return r
    })
    return { kind: 'batch', answers }
  }

  // --- comparison -----------------------------------------------------------------------------------------------

  /** Compares one add's answer with the model's; binds a new real job.id to the model job it stands for. */
  expectAnswer(label: string, expected: Answer, actual: RealAnswer): void {
    if (expected.kind === 'job' && actual.kind === 'job') this.bind(actual.id, expected.job)
    const a = actual.kind === 'job' ? this.actualJob(actual) : this.actualRejection(actual)
    const e =
      expected.kind === 'job'
        ? expectedJob(expected, actual.kind === 'job' && actual.deduplicated === null)
        : expectedRejection(expected, actual)
    expect(a, this.message(label)).toEqual(e)
  }

  /**
   * The same for a batch: every item's answer, or the one rejection (with the item it names, where the path says). A
   * rejection's owner may be an earlier item of the same batch (a job that never was, not among `kept`, the model's
   * jobs after the batch): then the real owner must be a job.id this world never saw either.
   */
  expectBatch(label: string, expected: BatchAnswer, actual: RealBatch, kept: readonly number[]): void {
    if (expected.kind === 'batch' && actual.kind === 'batch' && expected.answers.length === actual.answers.length) {
      expected.answers.forEach((e, i) => this.bind((actual.answers[i] as RealJob).id, e.job))
    }
    const inBatch = 'an item of the rejected batch'
    const ownerInBatch = expected.kind === 'rejected' && expected.owner !== null && !kept.includes(expected.owner)
    const a =
      actual.kind === 'batch'
        ? { kind: 'batch', answers: actual.answers.map((j) => this.actualJob(j)) }
        : { ...this.actualRejection(actual), index: actual.index }
    if (
      ownerInBatch &&
      actual.kind === 'rejected' &&
      actual.owner !== null &&
      actual.owner !== 'unknown' &&
      !this.known(actual.owner)
    )
      (a as Record<string, unknown>).owner = inBatch
    const sqlPath = actual.kind === 'batch' && actual.answers.some((j) => j.deduplicated === null)
    const e =
      expected.kind === 'batch'
        ? { kind: 'batch', answers: expected.answers.map((j) => expectedJob(j, sqlPath)) }
        : {
            ...expectedRejection(expected, actual),
            index: actual.kind === 'rejected' && actual.index === 'unknown' ? 'unknown' : expected.index,
          }
    if (ownerInBatch && (e as Record<string, unknown>).owner !== 'unknown')
      (e as Record<string, unknown>).owner = inBatch
    expect(a, this.message(label)).toEqual(e)
  }

  /** Compares what the database holds for this queue with the model: jobs, dependencies, key rows, and the lookups. */
  async expectRows(model: AdmissionModel, label: string): Promise<void> {
    const s = `"${this.schema}"`
    const { rows: jobs } = await this.pool.query<{
      id: string
      name: string
      state: string
      job_id: string | null
      data: unknown
      dedup_key: string | null
      priority: number
      max_attempts: number
      attempts: number
      delay_ms: number
      timeout_ms: number | null
      last_error: string | null
    }>(
      `select id::text, name, state, job_id, data, dedup_key, priority, max_attempts, attempts, last_error, timeout_ms,
              round(extract(epoch from run_at - created_at) * 1000)::float8 as delay_ms
       from ${s}.jobs where queue = $1`,
      [this.o.queue],
    )
    const { rows: edges } = await this.pool.query<{ child: string; parent: string }>(
      `select d.job_id::text as child, d.depends_on::text as parent
       from ${s}.job_dependencies d join ${s}.jobs c on c.id = d.job_id where c.queue = $1`,
      [this.o.queue],
    )
    const { rows: keys } = await this.pool.query<{ key: string; owner: string; ttl: boolean; expired: boolean }>(
      `select key, job_id::text as owner, expires_at is not null as ttl, coalesce(expires_at <= now(), false) as expired
       from ${s}.dedup_keys where queue = $1 order by key`,
      [this.o.queue],
    )
    const held: Record<string, unknown> = {}
    for (const k of this.o.keys) held[k] = this.ref(await this.queue.getDeduplicationJobId(k))
    const byCustomId: Record<string, unknown> = {}
    for (const j of this.o.jobIds) {
      const job = await this.queue.getJobByCustomId(this.o.jobIdPrefix + j)
      byCustomId[j] = job === null ? null : { job: this.ref(job.id), state: job.state }
    }

    const byRef = (a: { ref: unknown }, b: { ref: unknown }) =>
      String(a.ref).localeCompare(String(b.ref), 'en', { numeric: true })
    const actual = {
      jobs: jobs
        .map((j) => {
          const m = this.ids.toModel.get(j.id)
          const delayMs = m === undefined ? null : model.job(m)?.delayMs
          return {
            ref: this.ref(j.id),
            name: j.name,
            state: j.state,
            jobId: this.stripPrefix(j.job_id),
            data: j.data,
            key: j.dedup_key,
            priority: j.priority,
            maxAttempts: j.max_attempts,
            attempts: j.attempts,
            lastError: this.lastError(j.last_error),
            // A retry, or the promotion of a due job, moves run_at; the model stops tracking the delay then.
            delayMs: delayMs === null ? null : j.delay_ms,
            timeoutMs: j.timeout_ms,
          }
        })
        .sort(byRef),
      edges: edges.map((e) => `${this.ref(e.child)}->${this.ref(e.parent)}`).sort(),
      keys: keys.map((k) => ({ key: k.key, owner: this.ref(k.owner), ttl: k.ttl, expired: k.expired })),
      held,
      byCustomId,
    }
    const expected = {
      jobs: model.jobs().map((j) => ({
        ref: j.id,
        name: j.name,
        state: j.state,
        jobId: j.jobId,
        data: j.data,
        key: j.key,
        priority: j.priority,
        maxAttempts: j.maxAttempts,
        attempts: j.attempts,
        lastError: j.lastError,
        delayMs: j.delayMs,
        timeoutMs: j.timeoutMs,
      })),
      edges: model
        .jobs()
        .flatMap((j) => j.parents.map((p) => `${j.id}->${p}`))
        .sort(),
      keys: model.keyRows().map(([key, k]) => ({ key, owner: k.owner, ttl: k.ttl, expired: k.expired })),
      held: Object.fromEntries(this.o.keys.map((k) => [k, model.heldOwner(k)])),
      byCustomId: Object.fromEntries(
        this.o.jobIds.map((j) => {
          const id = model.byCustomId(j)
          return [j, id === null ? null : { job: id, state: model.job(id)?.state }]
        }),
      ),
    }
    expect(actual, this.message(`rows after ${label}`)).toEqual(expected)
  }

  /**
   * The lookups by id, compared with the model (once a run: a query per job): queue.getJob(id) finds every job of this
   * queue as stored, and none of another queue; getJobByCustomId is global, so another queue's Queue answers the same.
   */
  async expectLookups(model: AdmissionModel, label: string): Promise<void> {
    const other = new Queue<Payload>(`${this.o.queue}-other`, { pool: this.pool, schema: this.schema, migrate: false })
    try {
      const jobs = model.jobs()
      const actual = {
        getJob: await Promise.all(
          jobs.map(async (j) => {
            const job = await this.queue.getJob(this.realId(j.id))
            return job === null ? null : { ref: this.ref(job.id), state: job.state, data: job.data }
          }),
        ),
        otherQueueGetJob: await Promise.all(jobs.slice(0, 2).map((j) => other.getJob(this.realId(j.id)))),
        otherQueueByCustomId: await Promise.all(
          this.o.jobIds.map(async (j) => this.ref((await other.getJobByCustomId(this.o.jobIdPrefix + j))?.id ?? null)),
        ),
      }
      const expected = {
        getJob: jobs.map((j) => ({ ref: j.id, state: j.state, data: j.data })),
        otherQueueGetJob: jobs.slice(0, 2).map(() => null),
        otherQueueByCustomId: this.o.jobIds.map((j) => model.byCustomId(j)),
      }
      expect(actual, this.message(`lookups after ${label}`)).toEqual(expected)
    } finally {
      await other.close()
    }
  }

  // --- translation ----------------------------------------------------------------------------------------------

  private bind(realId: string, modelId: number): void {
    // Only a job new to both sides is bound; anything else must already match, and the comparison shows it if not.
    if (!this.ids.toModel.has(realId) && !this.ids.toReal.has(modelId)) {
      this.ids.toModel.set(realId, modelId)
      this.ids.toReal.set(modelId, realId)
    }
  }

  /** A real job.id in model terms: its model id, or a marker naming a job the model does not know. */
  private known(realId: string): boolean {
    return this.ids.toModel.has(realId)
  }

  private ref(realId: string | null): number | string | null {
    if (realId === null) return null
    return this.ids.toModel.get(realId) ?? `unknown job.id ${realId}`
  }

  /** last_error in model terms: the parent a dependency failure names, by model id. */
  private lastError(text: string | null): string | null {
    const dep = text === null ? null : /^dependency (\d+) (.*)$/.exec(text)
    if (dep === null) return text
    const ref = this.ref(dep[1] as string)
    return `dependency ${typeof ref === 'number' ? `#${ref}` : `(${ref})`} ${dep[2]}`
  }

  private stripPrefix(jobId: string | null): string | null {
    return jobId !== null && jobId.startsWith(this.o.jobIdPrefix) ? jobId.slice(this.o.jobIdPrefix.length) : jobId
  }

  private actualJob(j: RealJob): Record<string, unknown> {
    const { id, deduplicated, jobId, ...rest } = j
    const out: Record<string, unknown> = { kind: 'job', ...rest, job: this.ref(id), jobId: this.stripPrefix(jobId) }
    // The SQL functions do not say `deduplicated`; it is compared where the path does.
    if (deduplicated !== null) out.deduplicated = deduplicated
    return out
  }

  private actualRejection(r: RealRejection): Record<string, unknown> {
    return { kind: 'rejected', code: r.code, owner: r.owner === 'unknown' ? 'unknown' : this.ref(r.owner) }
  }

  private message(label: string): string {
    return `${label}\n  queue ${this.o.queue}, steps so far (model ids #n, real job.id in brackets):\n    ${this.trace.join('\n    ')}\n`
  }

  private jobOptions(r: ModelAdd): JobOptions {
    return definedOnly({
      jobId: this.jobIdOf(r),
      deduplication: r.dedup === undefined ? undefined : definedOnly({ ...r.dedup }),
      delay: r.delay,
      runAt: r.runAtPast ? PAST_MS : undefined,
      timeoutMs: r.timeoutMs,
      priority: r.priority,
      attempts: r.attempts,
      dependsOn: this.dependsOn(r),
    })
  }

  private jobIdOf(r: ModelAdd): string | undefined {
    return r.jobId === undefined ? undefined : this.o.jobIdPrefix + r.jobId
  }

  private dependsOn(r: ModelAdd): string[] | undefined {
    return r.dependsOn?.map((d) => (d === 'missing' ? MISSING_JOB_ID : this.realId(d)))
  }

  private fromJob(job: Job<Payload>): RealJob {
    return {
      outcome: job.outcome,
      deduplicated: job.deduplicated,
      id: job.id,
      name: job.name,
      state: job.state,
      data: job.data,
      jobId: job.jobId,
      key: job.deduplicationId,
      priority: job.priority,
      maxAttempts: job.maxAttempts,
      attempts: job.attempts,
    }
  }

  private fromSql(a: SqlAdmission): RealAnswer {
    if (a.error !== null) {
      const owner = a.job === 'unknown' ? 'unknown' : (a.job?.id ?? null)
      return { kind: 'rejected', code: a.error, owner, index: a.ordinal === null ? null : a.ordinal - 1 }
    }
    if (a.job === null || a.job === 'unknown') throw new Error(`add_job() answered ${a.outcome} without a job`)
    const j = a.job
    return {
      kind: 'job',
      outcome: a.outcome,
      deduplicated: null,
      id: j.id,
      name: j.name,
      state: j.state,
      data: j.data,
      jobId: j.job_id,
      key: j.dedup_key,
      priority: j.priority,
      maxAttempts: j.max_attempts,
      attempts: j.attempts,
    }
  }

  private rejection(err: unknown): RealRejection {
    if (err instanceof DeduplicationError)
      return { kind: 'rejected', code: err.code, owner: err.ownerId, index: 'unknown' }
    if (err instanceof ValidationError && err.code === 'DEPENDENCY_NOT_FOUND') {
      const at = /^items\[(\d+)\]/.exec(err.field)
      return { kind: 'rejected', code: err.code, owner: null, index: at === null ? null : Number(at[1]) }
    }
    throw err
  }
}

/** `o` without its undefined fields: an option left out, not an option set to undefined. */
function definedOnly<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T
}

/** The model's job answer, without `deduplicated` where the path does not say it. */
function expectedJob(e: JobAnswer, pathSaysNoDeduplicated: boolean): Record<string, unknown> {
  const out: Record<string, unknown> = { ...e }
  if (pathSaysNoDeduplicated) delete out.deduplicated
  return out
}

/** The model's rejection, without the owner where the path does not say it (add_job() raising). */
function expectedRejection(e: Answer & { kind: 'rejected' }, actual: RealAnswer | RealBatch): Record<string, unknown> {
  const unknownOwner = actual.kind === 'rejected' && actual.owner === 'unknown'
  return { kind: 'rejected', code: e.code, owner: unknownOwner ? 'unknown' : e.owner }
}
