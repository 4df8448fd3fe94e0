// The reference model of docs/deduplication.md (jobId generations, dedup keys with TTL/extend/replace, addBulk) and of what a
// job's end does to its key and its dependents, in plain TypeScript.
//
// One model for every entry point: queue.add, queue.add in a transaction, queue.addBulk, add_job() and add_jobs(); a
// batch is always its items one after another (docs/deduplication.md#addbulk). Jobs carry model ids (1, 2, …, in the order the model
// creates them); the property test maps real `job.id`s onto them.
//
// States: pending = waiting, delayed, waiting-children; live = pending + active (a worker claimed it and runs its
// handler); terminal = completed, failed, cancelled.
//
// A job's end (to a terminal state, however it got there: a worker's statement, a cancel, an operator's UPDATE) does,
// in the same transaction: its no-TTL key is released if it still owns it (generation-safe); its dependents still in
// waiting-children are promoted when it completed and every other parent they still have completed too ('waiting',
// or 'delayed' while their own delay runs), or failed when it failed or was cancelled (last_error 'dependency <id>
// ended failed|cancelled'), which is their end in turn (cascading, depth first in id order). A job row deleted (by
// hand, or superseded by a replace) takes its key rows and its dependency edges (both ways) with it; if it had not
// completed, its dependents still in waiting-children fail first ('dependency <id> was removed').
//
// Where the docs are silent the model follows add_job() (migrations/committed/000001-baseline.sql), and
// says so:
//  - a dependsOn naming a job that does not exist is rejected before the jobId rule is looked at;
//  - every dependency edge is recorded, blocking or not: a live job whose dependsOn named the owner is a "live
//    dependent" for REPLACE_HAS_DEPENDENTS whatever state the owner was in when it was added;
//  - a job added with dependsOn a parent that had already failed or been cancelled fails at once ('dependency <id>
//    ended failed', the first such parent of its dependsOn named), as its waiting siblings did when that parent ended;
//  - extend on a held key without TTL gives the key a TTL (expires_at = now() + ttl);
//  - a deleted parent neither blocks a promotion nor satisfies a dependency check (its edges are gone).
// The decision table's last row (docs/deduplication.md) covers one more case: a replace whose dependsOn names the
// pending owner it would supersede is rejected with REPLACE_HAS_DEPENDENTS (the new job would be that owner's live
// dependent).

export type JobState = 'waiting' | 'delayed' | 'waiting-children' | 'active' | 'completed' | 'failed' | 'cancelled'
export type Terminal = 'completed' | 'failed' | 'cancelled'
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
  /** runAt an instant already past: due now, as delay 0 (the insert below needs no case of its own). */
  runAtPast?: true
  timeoutMs?: number
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
  /** run_at - created_at in ms; null once run_at moved (a retry, or a promotion of a job that was due). */
  delayMs: number | null
  /** Its timeoutMs, as added (null: none). */
  timeoutMs: number | null
  /** Its dependency edges, by model id: every job its dependsOn named that still exists. */
  parents: number[]
  /** last_error, with a parent named by model id: `dependency #3 ended failed`. */
  lastError: string | null
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
export const isTerminal = (s: JobState): boolean => !LIVE.has(s)
/** What a claim takes: waiting or delayed (due or not: no worker runs, the test claims by hand). */
export const isQueued = (s: JobState): boolean => s === 'waiting' || s === 'delayed'

/** What an add leaves unsaid: _job_defaults() (the property test checks that they agree). */
export const JOB_DEFAULTS = { priority: 0, maxAttempts: 1 } as const

/** The message sql/fail-job.sql is given by the test (owner-transitions.ts). */
export const FAILURE_MESSAGE = 'admission-property failure'

export class AdmissionModel {
  private s: ModelState = { jobs: new Map(), keys: new Map(), created: [], nextId: 1 }
  /** What the last transitions did to dependents, for the coverage tally (drained by the caller). */
  readonly events: string[] = []

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

  /** docs/deduplication.md, decision table: held when the row exists, its owner row exists, and it has not expired or (no TTL) the owner is live. */
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
   * Which row and column of the decision table of docs/deduplication.md an add meets (plus the jobId rule), without changing anything:
   * the property test counts these to show that every cell was reached.
   */
  situation(req: ModelAdd): string {
    if (req.dependsOn?.some((d) => d === 'missing' || !this.s.jobs.has(d))) return 'dependency missing'
    if (req.jobId !== undefined && this.liveGeneration(req.jobId) !== undefined) return 'jobId live'
    const d = req.dedup
    if (d === undefined)
      return req.jobId === undefined ? (req.dependsOn === undefined ? 'plain' : 'dependsOn only') : 'jobId free'
    const strategy = d.replace === true ? 'replace' : d.extend === true ? 'extend' : 'no strategy'
    const k = this.s.keys.get(d.id)
    const heldBy = this.heldOwner(d.id)
    let where: string
    if (heldBy === null) {
      const owner = k === undefined ? undefined : this.s.jobs.get(k.owner)
      where =
        k === undefined
          ? 'absent'
          : owner === undefined
            ? 'owner row gone'
            : k.ttl
              ? 'expired'
              : 'no-TTL owner terminal'
      where = `not held (${where})`
    } else {
      const state = (this.s.jobs.get(heldBy) as ModelJob).state
      const of = isPending(state) ? 'pending' : state === 'active' ? 'active' : 'terminal'
      where = `held, owner ${of}`
      if (strategy === 'replace' && this.hasLiveDependent(heldBy)) {
        // Past waiting-children: only a completed owner can have one (promoted, or added after it completed).
        const queued = this.jobs().some(
          (c) => isLive(c.state) && c.state !== 'waiting-children' && c.parents.includes(heldBy),
        )
        where = `held, ${of} owner has a live dependent${queued ? ' past waiting-children' : ''}`
      } else if (strategy === 'replace' && this.supersedesOwnDependency(req))
        where = `held, ${of} owner named in dependsOn`
    }
    return `${where} / ${strategy}`
  }

  /** Finer cells of an add, for the coverage tally: what each dependsOn target is, and the state of a live jobId. */
  detailCells(req: ModelAdd): string[] {
    const cells = (req.dependsOn ?? []).map((d) => {
      const p = d === 'missing' ? undefined : this.s.jobs.get(d)
      if (p === undefined) return 'dependsOn a missing job'
      return `dependsOn a ${isLive(p.state) ? 'live' : p.state === 'completed' ? 'completed' : 'failed or cancelled'} parent`
    })
    const live = req.jobId === undefined ? undefined : this.liveGeneration(req.jobId)
    if (live !== undefined) cells.push(`jobId live, generation ${live.state}`)
    return cells
  }

  /**
   * A replace that would supersede (delete) the pending owner its own dependsOn names: rejected as the decision
   * table's "owner has a live dependent" (docs/deduplication.md).
   */
  supersedesOwnDependency(req: ModelAdd): boolean {
    if (req.dedup?.replace !== true || req.dependsOn === undefined) return false
    if (req.jobId !== undefined && this.liveGeneration(req.jobId) !== undefined) return false
    if (req.dependsOn.some((d) => d === 'missing' || !this.s.jobs.has(d))) return false
    const owner = this.heldOwner(req.dedup.id)
    return owner !== null && isPending((this.s.jobs.get(owner) as ModelJob).state) && req.dependsOn.includes(owner)
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
    if (dedup === undefined) return this.answer(this.failIfParentEnded(this.insert(req)), 'added')

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
    if (owner !== undefined && (this.hasLiveDependent(owner.id) || this.supersedesOwnDependency(req))) {
      return { kind: 'rejected', code: 'REPLACE_HAS_DEPENDENTS', owner: owner.id }
    }
    const job = this.insert(req)
    this.s.keys.set(dedup.id, { owner: job.id, ttl: dedup.ttl !== undefined, expired: false })
    // A pending owner is superseded: its row goes, with its edges; an active or terminal one stays.
    if (owner !== undefined && isPending(owner.state)) this.remove(owner.id)
    return this.answer(this.failIfParentEnded(job), owner === undefined ? 'added' : 'replaced')
  }

  /** A new job one of whose parents already failed or was cancelled can never run: it fails as it is added. */
  private failIfParentEnded(job: ModelJob): ModelJob {
    const ended = job.parents.map((p) => this.mustGet(p)).find((p) => p.state === 'failed' || p.state === 'cancelled')
    if (ended !== undefined) {
      this.events.push(`a job added after its parent ${ended.state} fails at once`)
      job.lastError = `dependency #${ended.id} ended ${ended.state}`
      this.end(job.id, 'failed')
    }
    return job
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

  /** A worker's claim, which starts what it takes: a waiting or delayed job becomes active, its attempt counted. */
  activate(id: number): void {
    const j = this.mustGet(id)
    if (!isQueued(j.state)) throw new Error(`model: job ${id} is ${j.state}, not claimable`)
    j.state = 'active'
    j.attempts += 1
  }

  /** sql/complete-jobs.sql: the completion of an active job. */
  complete(id: number): void {
    this.mustGetActive(id)
    this.end(id, 'completed')
  }

  /** sql/fail-job.sql with no backoff: failed for good after its last attempt, else waiting again. */
  fail(id: number): JobState {
    const j = this.mustGetActive(id)
    j.lastError = FAILURE_MESSAGE
    if (j.attempts >= j.maxAttempts) {
      this.end(id, 'failed')
    } else {
      j.state = 'waiting'
      j.delayMs = null
    }
    return j.state
  }

  /** An UPDATE to a terminal state by hand (an operator's, or a cancel): the trigger does the rest, as for any end. */
  finishByHand(id: number, state: Terminal): void {
    const j = this.mustGet(id)
    if (!isLive(j.state)) throw new Error(`model: job ${id} is ${j.state} already`)
    this.end(id, state)
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

  /** job.removeDeduplicationKey(): deletes the row only if this job owns it; true if it was held. */
  removeOwnKey(id: number): boolean {
    const j = this.mustGet(id)
    if (j.key === null || this.s.keys.get(j.key)?.owner !== id) return false
    const held = this.heldOwner(j.key) !== null
    this.s.keys.delete(j.key)
    return held
  }

  /** A job row deleted by hand. */
  vanish(id: number): void {
    this.mustGet(id)
    this.remove(id)
  }

  /** The jobs_finished trigger's work, after the state change. */
  private end(id: number, state: Terminal, depth = 0): void {
    const j = this.mustGet(id)
    j.state = state
    if (j.key !== null) {
      const k = this.s.keys.get(j.key)
      if (k !== undefined && k.owner === id && !k.ttl) this.s.keys.delete(j.key)
    }
    for (const c of this.waitingDependents(id)) {
      if (c.state !== 'waiting-children') continue // failed meanwhile by an earlier dependent's cascade
      if (state !== 'completed') {
        this.events.push(
          depth === 0 ? `${state} parent fails a dependent` : 'a failure cascades to a dependent of a dependent',
        )
        c.lastError = `dependency #${id} ended ${state}`
        this.end(c.id, 'failed', depth + 1)
      } else if (c.parents.every((p) => p === id || this.s.jobs.get(p)?.state === 'completed')) {
        const delayed = (c.delayMs ?? 0) > 0
        c.state = delayed ? 'delayed' : 'waiting'
        // run_at = greatest(run_at, now()): a due job's run_at moves to the promotion.
        if (!delayed) c.delayMs = null
        this.events.push(
          c.parents.length > 1
            ? 'completion promotes a dependent of several parents'
            : 'completion promotes a dependent',
        )
      } else {
        this.events.push('completion leaves a dependent waiting for another parent')
      }
    }
  }

  /** A row deleted: the jobs_removed trigger first (unless it completed), then the row, its keys and its edges. */
  private remove(id: number): void {
    const j = this.mustGet(id)
    if (j.state !== 'completed') {
      for (const c of this.waitingDependents(id)) {
        if (c.state !== 'waiting-children') continue
        this.events.push('removed parent fails a dependent')
        c.lastError = `dependency #${id} was removed`
        this.end(c.id, 'failed', 1)
      }
    }
    this.s.jobs.delete(id)
    for (const [key, k] of this.s.keys) if (k.owner === id) this.s.keys.delete(key)
    for (const c of this.s.jobs.values()) c.parents = c.parents.filter((p) => p !== id)
  }

  /** The jobs in waiting-children with an edge to `id`, in id order (the trigger's loop). */
  private waitingDependents(id: number): ModelJob[] {
    return this.jobs().filter((c) => c.state === 'waiting-children' && c.parents.includes(id))
  }

  private liveGeneration(jobId: string): ModelJob | undefined {
    for (const j of this.s.jobs.values()) if (j.jobId === jobId && isLive(j.state)) return j
    return undefined
  }

  private hasLiveDependent(id: number): boolean {
    for (const c of this.s.jobs.values()) if (isLive(c.state) && c.parents.includes(id)) return true
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
      priority: req.priority ?? JOB_DEFAULTS.priority,
      maxAttempts: req.attempts ?? JOB_DEFAULTS.maxAttempts,
      attempts: 0,
      delayMs,
      timeoutMs: req.timeoutMs ?? null,
      parents: deps,
      lastError: null,
    }
    this.s.jobs.set(job.id, job)
    this.s.created.push(job.id)
    return job
  }

  private answer(j: ModelJob, outcome: Outcome): JobAnswer {
    return {
      kind: 'job',
      outcome,
      deduplicated: outcome !== 'added' && outcome !== 'replaced',
      job: j.id,
      name: j.name,
      state: j.state,
      data: j.data,
      jobId: j.jobId,
      key: j.key,
      priority: j.priority,
      maxAttempts: j.maxAttempts,
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
