// The known disagreements with DESIGN.md that the admission property test steps around by default; PGONCE_PROPERTY_STRICT shows them.
//
// PGONCE_PROPERTY_STRICT=bulk-order, =dependents, or =1 (both).
//
// bulk-order (entry points disagree). DESIGN.md §2.3: inside one addBulk batch, items behave "as if added one after another". add_jobs() called directly
// does that, but queue.addBulk first sorts the batch into lock order (src/bulk-order.ts at the time of writing: plain
// items first, then groups of items that share a jobId or key, groups by their least lock key 'j:<jobId>' /
// 'k:<key>', input order within a group). Groups can still affect each other: a replace deletes a pending owner, and
// an item of another group may name that owner's jobId or depend on it; and when two groups would both be rejected,
// the order decides which rejection the batch reports. Example (test/admission.property.test.ts pins it):
//   [replace key k2 whose pending owner has jobId j2; jobId j2] -> queue.addBulk answers item 1 'duplicate-job-id'
//   with the owner that item 0 then deletes (an answer naming a job that does not exist); one after another, item 1
//   is 'added'.
// The model stays sequential. Outside strict mode, a queue.addBulk batch whose outcome under the model depends on that
// reordering is sent already in the order queue.addBulk admits it, so that every other drift still shows.
//
// dependents (every entry point agrees, DESIGN.md's wording does not). §2.2 rejects a replace when "another job
// dependsOn" the owner; add_job() records a dependency only when it blocks (the parent was not completed yet), so a
// job added with dependsOn a TTL-held owner that had already completed does not stop a replace, while one added before
// the owner completed does (REPLACE_HAS_DEPENDENTS, though a terminal owner is not deleted by a replace anyway).
// Outside strict mode the model follows add_job() (see test/helpers/admission-model.ts).

import { AdmissionModel, type BatchAnswer, type ModelAdd, type ModelState } from './admission-model.js'

const strict = new Set((process.env.PGONCE_PROPERTY_STRICT ?? '').split(',').map((s) => s.trim()))

/** Strict about the order of a queue.addBulk batch: the model's one-after-another answers, whatever pgonce's lock order. */
export const STRICT_BULK_ORDER = strict.has('1') || strict.has('bulk-order')
/** Strict about DESIGN.md's "another job dependsOn it": every declared dependency counts for REPLACE_HAS_DEPENDENTS. */
export const STRICT_DEPENDENTS = strict.has('1') || strict.has('dependents')

/** The model every run starts from. */
export function newModel(): AdmissionModel {
  return new AdmissionModel({ declaredDependents: STRICT_DEPENDENTS })
}

function lockKeys(r: ModelAdd): string[] {
  const keys: string[] = []
  if (r.jobId !== undefined) keys.push(`j:${r.jobId}`)
  if (r.dedup !== undefined) keys.push(`k:${r.dedup.id}`)
  return keys
}

/** Indices of `reqs` in the order queue.addBulk admits them (the rule of src/bulk-order.ts, restated). */
export function addBulkAdmissionOrder(reqs: readonly ModelAdd[]): number[] {
  const root = reqs.map((_, i) => i)
  const find = (i: number): number => (root[i] === i ? i : (root[i] = find(root[i] as number)))
  const firstWith = new Map<string, number>()
  reqs.forEach((r, i) => {
    for (const k of lockKeys(r)) {
      const other = firstWith.get(k)
      if (other === undefined) firstWith.set(k, i)
      else root[find(i)] = find(other)
    }
  })
  const least = new Map<number, string>()
  reqs.forEach((r, i) => {
    for (const k of lockKeys(r)) {
      const cur = least.get(find(i))
      if (cur === undefined || k < cur) least.set(find(i), k)
    }
  })
  const plain = reqs.flatMap((r, i) => (lockKeys(r).length === 0 && r.dependsOn === undefined ? [i] : []))
  const keyed = reqs.flatMap((r, i) => (lockKeys(r).length === 0 && r.dependsOn === undefined ? [] : [i]))
  const groupKey = (i: number) => least.get(find(i)) ?? ''
  keyed.sort((a, b) => {
    const ka = groupKey(a)
    const kb = groupKey(b)
    return ka < kb ? -1 : ka > kb ? 1 : find(a) - find(b) || a - b
  })
  return [...plain, ...keyed]
}

/** What a batch did, with every job named by its data (unique per add) instead of by model id: comparable across orders. */
function canonical(m: AdmissionModel, answer: BatchAnswer, order: readonly number[]): string {
  const n = (id: number | null) => (id === null ? null : m.job(id)?.data.n ?? `deleted:${id}`)
  const answers = answer.kind === 'batch'
    ? order.map((_, at) => order.indexOf(at)).map((pos) => {
      const a = answer.answers[pos]
      return a === undefined ? null : { outcome: a.outcome, job: a.data.n, state: a.state }
    })
    : { code: answer.code, item: order[answer.index], owner: n(answer.owner) }
  const jobs = m.jobs().map((j) => ({ n: j.data.n, state: j.state, parents: j.parents.map(n) })).sort((a, b) => a.n - b.n)
  const keys = m.keyRows().map(([key, k]) => ({ key, owner: n(k.owner), ttl: k.ttl, expired: k.expired }))
  return JSON.stringify({ answers, jobs, keys })
}

function runFrom(state: ModelState, reqs: readonly ModelAdd[], order: readonly number[]): string {
  const m = newModel()
  m.restore(state)
  return canonical(m, m.addBatch(order.map((i) => reqs[i] as ModelAdd)), order)
}

/**
 * The batch to send through queue.addBulk: `reqs` itself, unless (outside strict mode) its outcome under the model
 * depends on queue.addBulk's reordering, in which case it is sent in that order.
 */
export function addBulkItemsToSend(m: AdmissionModel, reqs: ModelAdd[]): { items: ModelAdd[]; reordered: boolean } {
  if (STRICT_BULK_ORDER) return { items: reqs, reordered: false }
  const order = addBulkAdmissionOrder(reqs)
  if (order.every((i, at) => i === at)) return { items: reqs, reordered: false }
  const state = m.snapshot()
  if (runFrom(state, reqs, reqs.map((_, i) => i)) === runFrom(state, reqs, order)) return { items: reqs, reordered: false }
  return { items: order.map((i) => reqs[i] as ModelAdd), reordered: true }
}
