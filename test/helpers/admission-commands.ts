// fast-check commands for the admission property test: adds through every entry point, and the owner transitions between them.
//
// A command is generated without knowing the model state, so it names jobs by "pick" numbers that are resolved when
// it runs (among the candidates; see JobStep and DepPick); the trace in a failure message shows what each resolved to.

import fc from 'fast-check'
import type pg from 'pg'
import {
  type AdmissionModel,
  type Answer,
  type BatchAnswer,
  type DepTarget,
  type ModelAdd,
  type ModelDedup,
  type ModelJob,
  FAILURE_MESSAGE,
  isLive,
  isQueued,
} from './admission-model.js'
import type { RealAnswer, RealBatch, World } from './admission-world.js'
import {
  claimJob,
  completeJob,
  deleteJobRow,
  expireKey,
  failJob,
  finishJobByHand,
  removeKey,
  removeOwnKey,
} from './owner-transitions.js'

/** A small key space and jobId space, so that adds collide all the time. */
export const KEYS = ['k1', 'k2', 'k3'] as const
export const JOB_IDS = ['j1', 'j2', 'j3'] as const

/** Rows are compared with the model after every this many steps (and at the end of a run). */
const CHECK_EVERY = 4

/** A TTL long enough never to run out during a run: keys expire only when a step backdates them. */
const TTLS = [60_000, 3_600_000] as const
/** A delay long enough never to come due during a run. */
const LONG_DELAY = 600_000

/**
 * A dependency before it is resolved: a number picks among every job created so far (deleted ones included: 0 the
 * first, wrapping around), `{ recent: n }` the n-th newest job that still exists (so that chains of dependents form),
 * `{ owner: key }` the job whose row owns that key now (else as `{ recent: 0 }`: so that key owners get dependents),
 * 'missing' a job id that never existed.
 */
export type DepPick = number | { recent: number } | { owner: string } | 'missing'

/** One add before its picks are resolved (see DepPick). */
export interface AddSpec {
  name: string
  jobId?: string
  dedup?: ModelDedup
  delay?: number
  /** runAt an instant already past (due now, as delay 0), never with delay. */
  runAtPast?: true
  /** timeoutMs, stored on the job an add inserts. */
  timeoutMs?: number
  priority?: number
  attempts?: number
  deps?: DepPick[]
}

const maybe = <T>(arb: fc.Arbitrary<T>, weight: number): fc.Arbitrary<T | undefined> =>
  fc.oneof({ weight: 10 - weight, arbitrary: fc.constant(undefined) }, { weight, arbitrary: arb })

const dedupArb: fc.Arbitrary<ModelDedup> = fc
  .record({
    id: fc.constantFrom(...KEYS),
    ttl: maybe(fc.constantFrom(...TTLS), 6),
    strategy: fc.constantFrom('none', 'none', 'extend', 'extend', 'replace', 'replace+extend', 'extend:false'),
  })
  .map(({ id, ttl, strategy }) => {
    const d: ModelDedup = { id }
    if (ttl !== undefined) d.ttl = ttl
    if (strategy === 'extend' || strategy === 'replace+extend') d.extend = true
    if (strategy === 'extend:false') d.extend = false
    if (strategy === 'replace' || strategy === 'replace+extend') d.replace = true
    // extend alone needs a TTL (a ValidationError otherwise, not an admission rule).
    if (d.extend === true && d.replace !== true && d.ttl === undefined) d.ttl = TTLS[0]
    return d
  })

export const addSpecArb: fc.Arbitrary<AddSpec> = fc
  .record({
    name: fc.constantFrom('push', 'mail'),
    jobId: maybe(fc.constantFrom(...JOB_IDS), 4),
    dedup: maybe(dedupArb, 6),
    delay: maybe(fc.constantFrom(0, LONG_DELAY), 2),
    runAtPast: maybe(fc.constant(true as const), 2),
    timeoutMs: maybe(fc.constantFrom(500, 60_000), 2),
    priority: maybe(fc.constantFrom(0, 3), 2),
    attempts: maybe(fc.constantFrom(1, 2), 2),
    deps: maybe(
      fc.uniqueArray(
        fc.oneof(
          { weight: 4, arbitrary: fc.nat(3).map((recent): DepPick => ({ recent })) },
          { weight: 3, arbitrary: fc.constantFrom(...KEYS).map((owner): DepPick => ({ owner })) },
          { weight: 2, arbitrary: fc.nat(40) },
          { weight: 1, arbitrary: fc.constant('missing' as const) },
        ),
        { minLength: 1, maxLength: 2, selector: (d) => JSON.stringify(d) },
      ),
      3,
    ),
  })
  .map((r) => {
    const spec: AddSpec = { name: r.name }
    for (const k of ['jobId', 'dedup', 'delay', 'timeoutMs', 'priority', 'attempts', 'deps'] as const) {
      if (r[k] !== undefined) Object.assign(spec, { [k]: r[k] })
    }
    if (r.runAtPast !== undefined && r.delay === undefined) spec.runAtPast = true
    return spec
  })

function describeSpec(s: AddSpec | ModelAdd): string {
  const parts: string[] = [s.name]
  if ('data' in s) parts.push(`n${s.data.n}`)
  if (s.jobId !== undefined) parts.push(`jobId:${s.jobId}`)
  if (s.dedup !== undefined) {
    const flags = [
      s.dedup.ttl === undefined ? '' : `ttl${s.dedup.ttl}`,
      s.dedup.extend === undefined ? '' : `extend:${s.dedup.extend}`,
      s.dedup.replace ? 'replace' : '',
    ].filter((f) => f !== '')
    parts.push(`key:${s.dedup.id}${flags.length === 0 ? '' : `(${flags.join(',')})`}`)
  }
  if (s.delay !== undefined) parts.push(`delay:${s.delay}`)
  if (s.runAtPast) parts.push('runAt:past')
  if (s.timeoutMs !== undefined) parts.push(`timeout:${s.timeoutMs}`)
  if (s.priority !== undefined) parts.push(`priority:${s.priority}`)
  if (s.attempts !== undefined) parts.push(`attempts:${s.attempts}`)
  const deps =
    'deps' in s
      ? s.deps?.map((d) =>
          d === 'missing'
            ? d
            : typeof d === 'number'
              ? `pick${d}`
              : 'owner' in d
                ? `ownerOf:${d.owner}`
                : `recent${d.recent}`,
        )
      : (s as ModelAdd).dependsOn?.map((d) => (d === 'missing' ? d : `#${d}`))
  if (deps !== undefined) parts.push(`dependsOn:[${deps.join(',')}]`)
  return parts.join(' ')
}

function describeAnswer(a: Answer | BatchAnswer): string {
  if (a.kind === 'rejected')
    return `rejected ${a.code}${a.owner === null ? '' : ` (owner #${a.owner})`}${'index' in a ? ` at item ${a.index}` : ''}`
  if (a.kind === 'batch') return `[${a.answers.map(describeAnswer).join('; ')}]`
  return `${a.outcome} #${a.job} ${a.state}`
}

/** How often each situation (decision-table cell, docs/deduplication.md) met each entry point, over all runs of the file. */
export const coverage = new Map<string, number>()

function tally(cell: string, path: string): void {
  const key = `${cell} | ${path}`
  coverage.set(key, (coverage.get(key) ?? 0) + 1)
}

/** Counts what the model's transitions did to dependents since the last drain (promotions, failures, cascades). */
function tallyEvents(m: AdmissionModel, by: string): void {
  for (const e of m.events.splice(0)) tally(e, by)
}

/** Counts an add's cell of the decision table (docs/deduplication.md) and its finer cells (dependsOn targets, live jobId), in the state the model is in before it. */
function tallyAdd(m: AdmissionModel, req: ModelAdd, at: string): void {
  tally(m.situation(req), at)
  for (const cell of m.detailCells(req)) tally(cell, at)
}

/** Resolves picks against the model: the data of the add, and dependsOn as model ids (deleted jobs included). */
function resolve(spec: AddSpec, m: AdmissionModel, w: World): ModelAdd {
  const { deps, ...rest } = spec
  const req: ModelAdd = { ...rest, data: w.nextPayload() }
  if (deps !== undefined) {
    const created = m.created()
    const existing = m.jobs()
    req.dependsOn = deps.map((d): DepTarget => {
      if (d === 'missing') return d
      if (typeof d === 'number') return created.length === 0 ? 'missing' : (created[d % created.length] as number)
      const owner = 'owner' in d ? m.keyRows().find(([k]) => k === d.owner)?.[1].owner : undefined
      if (owner !== undefined) return owner
      const recent = 'recent' in d ? d.recent : 0
      return existing.length === 0
        ? 'missing'
        : (existing[existing.length - 1 - (recent % existing.length)] as ModelJob).id
    })
  }
  return req
}

/** Each step runs against the model and the database, compares, and every few steps compares all rows. */
abstract class Step implements fc.AsyncCommand<AdmissionModel, World> {
  check(): boolean {
    return true
  }

  async run(m: AdmissionModel, w: World): Promise<void> {
    await this.apply(m, w)
    tallyEvents(m, this.by())
    if (++w.steps % CHECK_EVERY === 0) await w.expectRows(m, `step ${w.steps}`)
  }

  /** What the step is called in the coverage tally of what transitions did. */
  protected by(): string {
    return 'an add'
  }

  protected abstract apply(m: AdmissionModel, w: World): Promise<void>
  abstract toString(): string
}

type AddPath = 'queue.add' | 'add_job' | 'add_job(raise_rejection => false)'
type BulkPath = 'queue.addBulk' | 'add_jobs'

async function runAdd(path: AddPath, req: ModelAdd, m: AdmissionModel, w: World, tx?: pg.PoolClient): Promise<void> {
  const at = tx === undefined ? path : `${path} in tx`
  tallyAdd(m, req, at)
  const expected = m.add(req)
  const label = `${path}${tx === undefined ? '' : ' in tx'} ${describeSpec(req)} => model: ${describeAnswer(expected)}`
  w.log(label)
  const actual: RealAnswer =
    path === 'queue.add' ? await w.add(req, tx) : await w.sqlAdd(req, path === 'add_job' ? undefined : false, tx)
  w.expectAnswer(label, expected, actual)
}

async function runBulk(
  path: BulkPath,
  reqs: ModelAdd[],
  m: AdmissionModel,
  w: World,
  tx?: pg.PoolClient,
): Promise<void> {
  const at = tx === undefined ? path : `${path} in tx`
  // Each item is counted in the state the model is in before the batch (a repeat inside it may meet another cell).
  for (const r of reqs) tallyAdd(m, r, at)
  // queue.addBulk sends a batch of plain items to add_plain_jobs() instead of add_jobs().
  if (reqs.every((r) => r.jobId === undefined && r.dedup === undefined && r.dependsOn === undefined))
    tally('all-plain batch', at)
  const expected = m.addBatch(reqs)
  const label = `${path}${tx === undefined ? '' : ' in tx'} [${reqs.map(describeSpec).join('; ')}] => model: ${describeAnswer(expected)}`
  w.log(label)
  const actual: RealBatch = path === 'queue.addBulk' ? await w.addBulk(reqs, tx) : await w.sqlAddBulk(reqs, tx)
  w.expectBatch(label, expected, actual, m.created())
}

class AddStep extends Step {
  constructor(
    readonly path: AddPath,
    readonly spec: AddSpec,
  ) {
    super()
  }
  protected apply(m: AdmissionModel, w: World): Promise<void> {
    return runAdd(this.path, resolve(this.spec, m, w), m, w)
  }
  toString(): string {
    return `${this.path}(${describeSpec(this.spec)})`
  }
}

class BulkStep extends Step {
  constructor(
    readonly path: BulkPath,
    readonly specs: AddSpec[],
  ) {
    super()
  }
  protected apply(m: AdmissionModel, w: World): Promise<void> {
    return runBulk(
      this.path,
      this.specs.map((s) => resolve(s, m, w)),
      m,
      w,
    )
  }
  toString(): string {
    return `${this.path}([${this.specs.map(describeSpec).join('; ')}])`
  }
}

type TxOp =
  | { path: 'queue.add' | 'add_job(raise_rejection => false)'; spec: AddSpec }
  | { path: 'queue.addBulk'; specs: AddSpec[] }

/** Adds on the test's own connection inside BEGIN … COMMIT/ROLLBACK; after a rollback the model must be as before. */
class TxStep extends Step {
  constructor(
    readonly ops: TxOp[],
    readonly commit: boolean,
  ) {
    super()
  }
  protected async apply(m: AdmissionModel, w: World): Promise<void> {
    const model = m.snapshot()
    const ids = w.snapshotIds()
    w.log('begin')
    const client = await w.pool.connect()
    try {
      await client.query('begin')
      for (const op of this.ops) {
        if (op.path === 'queue.addBulk')
          await runBulk(
            op.path,
            op.specs.map((s) => resolve(s, m, w)),
            m,
            w,
            client,
          )
        else await runAdd(op.path, resolve(op.spec, m, w), m, w, client)
      }
      await client.query(this.commit ? 'commit' : 'rollback')
    } catch (err) {
      await client.query('rollback').catch(() => {})
      throw err
    } finally {
      client.release()
    }
    w.log(this.commit ? 'commit' : 'rollback')
    if (!this.commit) {
      m.restore(model)
      w.restoreIds(ids)
      await w.expectRows(m, 'rollback')
    }
  }
  toString(): string {
    const ops = this.ops.map((op) =>
      'specs' in op ? `${op.path}([${op.specs.map(describeSpec).join('; ')}])` : `${op.path}(${describeSpec(op.spec)})`,
    )
    return `tx(${ops.join(', ')}, ${this.commit ? 'commit' : 'rollback'})`
  }
}

type JobAction = 'claim' | 'complete' | 'fail' | 'cancel' | 'finishByHand' | 'removeOwnKey' | 'deleteRow'

/** A transition of one job picked among the candidates the model offers; nothing to do when there are none. */
class JobStep extends Step {
  constructor(
    readonly action: JobAction,
    readonly pick: number,
  ) {
    super()
  }
  protected async apply(m: AdmissionModel, w: World): Promise<void> {
    // Bits of the pick: the lowest chooses completed or failed (finishByHand), the next whether to prefer a parent that
    // a job in waiting-children waits on (so that ends meet dependents often), the rest which candidate.
    const all = m.jobs()
    const candidates = all.filter((j) => this.accepts(j))
    const parents = new Set(all.flatMap((c) => (c.state === 'waiting-children' ? c.parents : [])))
    const preferred = (this.pick >> 1) % 2 === 0 ? candidates.filter((j) => parents.has(j.id)) : []
    const among = preferred.length > 0 ? preferred : candidates
    const job = among[(this.pick >> 2) % Math.max(among.length, 1)]
    if (job === undefined) return
    const id = w.realId(job.id)
    const db = { pool: w.pool, schema: w.schema }
    const byHand = this.pick % 2 === 0 ? 'completed' : 'failed'
    const label = `${this.action}${this.action === 'finishByHand' ? ` ${byHand}` : ''} #${job.id} [${id}] (${job.state})`
    w.log(label)
    switch (this.action) {
      case 'claim':
        m.activate(job.id)
        w.tokens.set(id, await claimJob(db, id))
        return
      case 'complete': {
        m.complete(job.id)
        const row = await completeJob(db, id, w.tokens.get(id) ?? '')
        if (row?.state !== 'completed')
          throw new Error(`${label}: complete-jobs answered ${JSON.stringify(row)}, not completed`)
        return
      }
      case 'fail': {
        const expected = m.fail(job.id)
        const actual = await failJob(db, id, w.tokens.get(id) ?? '', FAILURE_MESSAGE)
        if (actual !== expected) throw new Error(`${label}: fail-job left it ${actual}, the model ${expected}`)
        return
      }
      case 'cancel':
      case 'finishByHand': {
        const state = this.action === 'cancel' ? 'cancelled' : byHand
        m.finishByHand(job.id, state)
        if (!(await finishJobByHand(db, id, state))) throw new Error(`${label}: the UPDATE found it no longer live`)
        return
      }
      case 'removeOwnKey': {
        const expected = m.removeOwnKey(job.id)
        const actual = await removeOwnKey(w.queue, id)
        if (actual !== expected)
          throw new Error(`${label}: job.removeDeduplicationKey() answered ${actual}, the model ${expected}`)
        return
      }
      case 'deleteRow':
        m.vanish(job.id)
        await deleteJobRow(db, id)
    }
  }
  protected override by(): string {
    return this.action
  }
  private accepts(j: ModelJob): boolean {
    switch (this.action) {
      case 'claim':
        return isQueued(j.state)
      case 'complete':
      case 'fail':
        return j.state === 'active'
      case 'cancel':
      case 'finishByHand':
        return isLive(j.state)
      case 'removeOwnKey':
        return j.key !== null
      case 'deleteRow':
        return true
    }
  }
  toString(): string {
    return `${this.action}(pick${this.pick})`
  }
}

class KeyStep extends Step {
  constructor(
    readonly action: 'expire' | 'removeKey',
    readonly key: string,
  ) {
    super()
  }
  protected async apply(m: AdmissionModel, w: World): Promise<void> {
    w.log(`${this.action} ${this.key}`)
    if (this.action === 'expire') {
      m.expire(this.key)
      await expireKey({ pool: w.pool, schema: w.schema }, w.queueName, this.key)
      return
    }
    const expected = m.removeKey(this.key)
    const actual = await removeKey(w.queue, this.key)
    if (actual !== expected)
      throw new Error(`removeDeduplicationKey(${this.key}) answered ${actual}, the model ${expected}`)
  }
  toString(): string {
    return `${this.action}(${this.key})`
  }
}

/**
 * Steps written by hand, for scenarios; numbers in `deps` index the jobs created so far (0: the first); a job step's
 * pick 0 takes the first candidate (a parent of a waiting dependent first), and finishByHand 0 completes, 1 fails.
 */
export const script = {
  add: (path: AddPath, spec: AddSpec): Step => new AddStep(path, spec),
  bulk: (path: BulkPath, specs: AddSpec[]): Step => new BulkStep(path, specs),
  job: (action: JobStep['action'], pick: number): Step => new JobStep(action, pick),
  key: (action: KeyStep['action'], key: string): Step => new KeyStep(action, key),
}

const batchArb = fc.array(addSpecArb, { minLength: 1, maxLength: 4 })
const pickArb = fc.nat(160)

/** Every step the property draws from, weighted towards adds. */
export const stepArb: fc.Arbitrary<Step> = fc.oneof(
  { weight: 3, arbitrary: addSpecArb.map((s) => new AddStep('queue.add', s)) },
  { weight: 2, arbitrary: addSpecArb.map((s) => new AddStep('add_job', s)) },
  { weight: 1, arbitrary: addSpecArb.map((s) => new AddStep('add_job(raise_rejection => false)', s)) },
  { weight: 2, arbitrary: batchArb.map((s) => new BulkStep('queue.addBulk', s)) },
  { weight: 2, arbitrary: batchArb.map((s) => new BulkStep('add_jobs', s)) },
  {
    weight: 2,
    arbitrary: fc
      .record({
        ops: fc.array(
          fc.oneof(
            addSpecArb.map((spec): TxOp => ({ path: 'queue.add', spec })),
            addSpecArb.map((spec): TxOp => ({ path: 'add_job(raise_rejection => false)', spec })),
            batchArb.map((specs): TxOp => ({ path: 'queue.addBulk', specs })),
          ),
          { minLength: 1, maxLength: 3 },
        ),
        commit: fc.boolean(),
      })
      .map(({ ops, commit }) => new TxStep(ops, commit)),
  },
  { weight: 4, arbitrary: pickArb.map((p) => new JobStep('claim', p)) },
  { weight: 3, arbitrary: pickArb.map((p) => new JobStep('complete', p)) },
  { weight: 2, arbitrary: pickArb.map((p) => new JobStep('fail', p)) },
  { weight: 1, arbitrary: pickArb.map((p) => new JobStep('cancel', p)) },
  { weight: 2, arbitrary: pickArb.map((p) => new JobStep('finishByHand', p)) },
  { weight: 1, arbitrary: pickArb.map((p) => new JobStep('removeOwnKey', p)) },
  { weight: 1, arbitrary: pickArb.map((p) => new JobStep('deleteRow', p)) },
  { weight: 2, arbitrary: fc.constantFrom(...KEYS).map((k) => new KeyStep('expire', k)) },
  { weight: 1, arbitrary: fc.constantFrom(...KEYS).map((k) => new KeyStep('removeKey', k)) },
)
