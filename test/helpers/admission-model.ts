// The reference model of DESIGN.md §2 (jobId generations, dedup keys with TTL/extend/replace, addBulk) in plain TypeScript.
//
// One model for every entry point: queue.add, queue.add in a transaction, queue.addBulk, add_job() and add_jobs().
// Jobs carry model ids (1, 2, …, in the order the model creates them); the property test maps real `job.id`s onto them.
// Where DESIGN.md is silent the model follows what add_job() does (migrations/committed/000001-schema.sql), and says so:
//  - a dependsOn naming a job that does not exist is rejected before the jobId rule is looked at;
//  - a dependency is recorded only when it blocks the new job (some parent not completed at insert time), so a job
//    added after its parent completed is not a "live dependent" for REPLACE_HAS_DEPENDENTS. DESIGN.md's wording
//    ("another job dependsOn it") says it is: `new AdmissionModel({ declaredDependents: true })` reads it that way
//    (test/helpers/known-drift.ts turns it on in strict mode);
//  - extend on a held key without TTL gives the key a TTL (expires_at = now() + ttl);
//  - a deleted parent (replaced, or removed by hand) neither blocks a promotion nor satisfies a dependency check; so a
//    replace whose dependsOn names the very owner it supersedes leaves the new job in waiting-children for good
//    (recorded against a parent that is gone, and only a parent's completion promotes).

export type JobState = 'waiting' | 'delayed' | 'waiting-children' | 'active' | 'completed' | 'failed'
export type Outcome = 'added' | 'duplicate-job-id' | 'duplicate-key' | 'extended' | 'replaced'
export type RejectionCode = 'EXTEND_NOT_PENDING' | 'REPLACE_HAS_DEPENDENTS' | 'DEPENDENCY_NOT_FOUND'

/** The data every test add carries: a number unique to the add, so that stored data names the request that made it. */
export interface Payload {
  n: number
}

/** A dependency target: a model job id (it may since have been deleted) or a job id that never existed. */
export type DepTarget = number | 'missing'

export interface ModelDedup {
  id: string
  ttl?: number
  extend?: boolean
  replace?: boolean
}

/** One add, path-independent: what queue.add, addBulk items, add_job() and add_jobs() items are all built from. */
export interface ModelAdd {
  name: string
  data: Payload
  jobId?: string
  dedup?: ModelDedup
  delay?: number
  priority?: number
  attempts?: number
  dependsOn?: DepTarget[]
}

export interface ModelJob {
  id: number
  name: string
  data: Payload
  state: JobState
  jobId: string | null
  key: string | null
  priority: number
  maxAttempts: number
  attempts: number
  /** run_at - created_at in ms; null once a retry has moved run_at. */
  delayMs: number | null
  /** The dependency rows recorded for this job (only when it was blocked at insert), by model id. */
  parents: number[]
  /** Every job its dependsOn named, recorded or not. */
  dependsOn: number[]
}

/** A dedup_keys row: its owner, whether expires_at is set, and whether it is in the past (backdated). */
export interface ModelKey {
  owner: number
  ttl: boolean
  expired: boolean
}

/** The job that answers an add, as the answer shows it. */
export interface JobAnswer {
  kind: 'job'
  outcome: Outcome
  deduplicated: boolean
  job: number
  name: string
  state: JobState
  data: Payload
  jobId: string | null
  key: string | null
  priority: number
  maxAttempts: number
  attempts: number
}

export interface Rejection {
  kind: 'rejected'
  code: RejectionCode
  /** The key's owner (EXTEND_NOT_PENDING, REPLACE_HAS_DEPENDENTS), null for DEPENDENCY_NOT_FOUND. */
  owner: number | null
}

export type Answer = JobAnswer | Rejection

export type BatchAnswer = { kind: 'batch'; answers: JobAnswer[] } | (Rejection & { index: number })

/** Everything the model knows; plain data, so that a transaction or a batch can snapshot and restore it. */
export interface ModelState {
  jobs: Map<number, ModelJob>
  keys: Map<string, ModelKey>
  /** Every model id ever created, deleted ones included, in creation order (dependsOn may name a deleted job). */
  created: number[]
  nextId: number
}

const PENDING: ReadonlySet<JobState> = new Set(['waiting', 'delayed', 'waiting-children'])
const LIVE: ReadonlySet<JobState> = new Set(['waiting', 'delayed', 'waiting-children', 'active'])

export const isPending = (s: JobState): boolean => PENDING.has(s)
export const isLive = (s: JobState): boolean => LIVE.has(s)

export interface ModelOptions {
  /** REPLACE_HAS_DEPENDENTS counts every live job whose dependsOn named the owner, not only recorded dependencies. */
  declaredDependents?: boolean
}

export class AdmissionModel {
  private s: ModelState = { jobs: new Map(), keys: new Map(), created: [], nextId: 1 }

  constructor(private readonly options: ModelOptions = {}) {}

  snapshot(): ModelState {
    return structuredClone(this.s)
  }

  restore(state: ModelState): void {
    this.s = structuredClone(state)
  }

  /** Existing jobs, by model id. */
  jobs(): ModelJob[] {
    return [...this.s.jobs.values()].sort((a, b) => a.id - b.id)
  }

  job(id: number): ModelJob | undefined {
    return this.s.jobs.get(id)
  }

  /** Every model id ever created, deleted ones included. */
  created(): readonly number[] {
    return this.s.created
  }

  keyRows(): [string, ModelKey][] {
    return [...this.s.keys.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
  }

  /** DESIGN.md §2.2: held when the row exists, its owner row exists, and it has not expired or (no TTL) the owner is live. */
  heldOwner(key: string): number | null {
    const k = this.s.keys.get(key)
    if (k === undefined) return null
    const owner = this.s.jobs.get(k.owner)
    if (owner === undefined) return null
    if (k.ttl ? !k.expired : isLive(owner.state)) return owner.id
    return null
  }

  /** getJobByCustomId: the live generation, else the newest terminal one (creation order = id order), else null. */
  byCustomId(jobId: string): number | null {
    const gens = this.jobs().filter((j) => j.jobId === jobId)
    const live = gens.find((j) => isLive(j.state))
    if (live !== undefined) return live.id
    return gens.at(-1)?.id ?? null
  }

  /**
   * Which row and column of the DESIGN.md §2.2 table an add meets (plus the jobId rule), without changing anything:
   * the property test counts these to show that every cell was reached.
   */
  situation(req: ModelAdd): string {
    if (req.dependsOn?.some((d) => d === 'missing' || !this.s.jobs.has(d))) return 'dependency missing'
    if (req.jobId !== undefined && this.liveGeneration(req.jobId) !== undefined) return 'jobId live'
    const d = req.dedup
    if (d === undefined) return req.jobId === undefined ? 'plain' : 'jobId free'
    const strategy = d.replace === true ? 'replace' : d.extend === true ? 'extend' : 'no strategy'
    const k = this.s.keys.get(d.id)
    const heldBy = this.heldOwner(d.id)
    let where: string
    if (heldBy === null) {
      const owner = k === undefined ? undefined : this.s.jobs.get(k.owner)
      where = k === undefined ? 'absent' : owner === undefined ? 'owner row gone' : k.ttl ? 'expired' : 'no-TTL owner terminal'
      where = `not held (${where})`
    } else {
      const state = (this.s.jobs.get(heldBy) as ModelJob).state
      where = `held, owner ${isPending(state) ? 'pending' : state === 'active' ? 'active' : 'terminal'}`
      if (strategy === 'replace' && this.hasLiveDependent(heldBy)) where = 'held, owner has a live dependent'
    }
    return `${where} / ${strategy}`
  }

  /** One add, applied as add_job() decides it. */
  add(req: ModelAdd): Answer {
    // add_job() checks the dependencies before anything else (even before a live jobId answers).
    if (req.dependsOn?.some((d) => d === 'missing' || !this.s.jobs.has(d))) {
      return { kind: 'rejected', code: 'DEPENDENCY_NOT_FOUND', owner: null }
    }
    if (req.jobId !== undefined) {
      const live = this.liveGeneration(req.jobId)
      if (live !== undefined) return this.answer(live, 'duplicate-job-id')
    }
    const dedup = req.dedup
    if (dedup === undefined) return this.answer(this.insert(req), 'added')

    const heldBy = this.heldOwner(dedup.id)
    const owner = heldBy === null ? undefined : this.s.jobs.get(heldBy)
    if (owner !== undefined && dedup.replace !== true) {
      if (dedup.extend === true) {
        if (!isPending(owner.state)) return { kind: 'rejected', code: 'EXTEND_NOT_PENDING', owner: owner.id }
        this.s.keys.set(dedup.id, { owner: owner.id, ttl: true, expired: false })
        return this.answer(owner, 'extended')
      }
      return this.answer(owner, 'duplicate-key')
    }
    if (owner !== undefined && this.hasLiveDependent(owner.id)) {
      return { kind: 'rejected', code: 'REPLACE_HAS_DEPENDENTS', owner: owner.id }
    }
    const job = this.insert(req)
    // A pending owner is superseded (its row and its own dependency rows go); an active or terminal one stays.
    if (owner !== undefined && isPending(owner.state)) this.s.jobs.delete(owner.id)
    this.s.keys.set(dedup.id, { owner: job.id, ttl: dedup.ttl !== undefined, expired: false })
    return this.answer(job, owner === undefined ? 'added' : 'replaced')
  }

  /** addBulk / add_jobs(): items one after another; the first rejection undoes the whole batch. */
  addBatch(reqs: readonly ModelAdd[]): BatchAnswer {
    const before = this.snapshot()
    const answers: JobAnswer[] = []
    for (const [index, req] of reqs.entries()) {
      const a = this.add(req)
      if (a.kind === 'rejected') {
        this.restore(before)
        return { ...a, index }
      }
      answers.push(a)
    }
    return { kind: 'batch', answers }
  }

  /** What a worker's claim does: a waiting or delayed job becomes active, its attempt counted. */
  activate(id: number): void {
    const j = this.mustGet(id)
    if (j.state !== 'waiting' && j.state !== 'delayed') throw new Error(`model: job ${id} is ${j.state}, not claimable`)
    j.state = 'active'
    j.attempts += 1
  }

  /** sql/complete-jobs.sql: completed; its no-TTL key released if it still owns it; dependents promoted. */
  complete(id: number): void {
    const j = this.mustGetActive(id)
    j.state = 'completed'
    this.releaseNoTtlKey(j)
    for (const c of this.s.jobs.values()) {
      if (c.state !== 'waiting-children' || !c.parents.includes(id)) continue
      const blocked = c.parents.some((p) => {
        const parent = this.s.jobs.get(p)
        return parent !== undefined && parent.state !== 'completed'
      })
      if (!blocked) c.state = (c.delayMs ?? 0) > 0 ? 'delayed' : 'waiting'
    }
  }

  /** sql/fail-job.sql with no backoff: failed for good after its last attempt (key released), else waiting again. */
  fail(id: number): JobState {
    const j = this.mustGetActive(id)
    if (j.attempts >= j.maxAttempts) {
      j.state = 'failed'
      this.releaseNoTtlKey(j)
    } else {
      j.state = 'waiting'
      j.delayMs = null
    }
    return j.state
  }

  /** expires_at backdated into the past (a key without TTL is left alone). */
  expire(key: string): void {
    const k = this.s.keys.get(key)
    if (k !== undefined && k.ttl) k.expired = true
  }

  /** queue.removeDeduplicationKey: deletes the row whoever owns it; true if it was held. */
  removeKey(key: string): boolean {
    const held = this.heldOwner(key) !== null
    this.s.keys.delete(key)
    return held
  }

  /** job.removeDeduplicationKey(): deletes the row only if this job owns it; true if a row went. */
  removeOwnKey(id: number): boolean {
    const j = this.mustGet(id)
    if (j.key === null || this.s.keys.get(j.key)?.owner !== id) return false
    this.s.keys.delete(j.key)
    return true
  }

  /** Completed or failed by an operator's UPDATE: nothing else happens (no key release, no promotion). */
  finishByHand(id: number, state: 'completed' | 'failed'): void {
    this.mustGet(id).state = state
  }

  /** A job row deleted by hand: its key (if any) becomes an orphan, which is not held. */
  vanish(id: number): void {
    this.mustGet(id)
    this.s.jobs.delete(id)
  }

  private liveGeneration(jobId: string): ModelJob | undefined {
    for (const j of this.s.jobs.values()) if (j.jobId === jobId && isLive(j.state)) return j
    return undefined
  }

  private hasLiveDependent(id: number): boolean {
    const of = (c: ModelJob) => (this.options.declaredDependents === true ? c.dependsOn : c.parents)
    for (const c of this.s.jobs.values()) if (isLive(c.state) && of(c).includes(id)) return true
    return false
  }

  private insert(req: ModelAdd): ModelJob {
    const deps = [...new Set((req.dependsOn ?? []) as number[])]
    const blocked = deps.some((d) => this.s.jobs.get(d)?.state !== 'completed')
    const delayMs = req.delay ?? 0
    const job: ModelJob = {
      id: this.s.nextId++,
      name: req.name,
      data: req.data,
      state: blocked ? 'waiting-children' : delayMs > 0 ? 'delayed' : 'waiting',
      jobId: req.jobId ?? null,
      key: req.dedup?.id ?? null,
      priority: req.priority ?? 0,
      maxAttempts: req.attempts ?? 1,
      attempts: 0,
      delayMs,
      parents: blocked ? deps : [],
      dependsOn: deps,
    }
    this.s.jobs.set(job.id, job)
    this.s.created.push(job.id)
    return job
  }

  private releaseNoTtlKey(j: ModelJob): void {
    if (j.key === null) return
    const k = this.s.keys.get(j.key)
    if (k !== undefined && k.owner === j.id && !k.ttl) this.s.keys.delete(j.key)
  }

  private answer(j: ModelJob, outcome: Outcome): JobAnswer {
    return {
      kind: 'job', outcome, deduplicated: outcome !== 'added' && outcome !== 'replaced', job: j.id, name: j.name,
      state: j.state, data: j.data, jobId: j.jobId, key: j.key, priority: j.priority, maxAttempts: j.maxAttempts,
      attempts: j.attempts,
    }
  }

  private mustGet(id: number): ModelJob {
    const j = this.s.jobs.get(id)
    if (j === undefined) throw new Error(`model: no job ${id}`)
    return j
  }

  private mustGetActive(id: number): ModelJob {
    const j = this.mustGet(id)
    if (j.state !== 'active') throw new Error(`model: job ${id} is ${j.state}, not active`)
    return j
  }
}
