// The known disagreements with DESIGN.md that the admission property test steps around by default; PGONCE_PROPERTY_STRICT shows them.
//
// PGONCE_PROPERTY_STRICT=replace-own-dependency, or =1 (all of them).
//
// replace-own-dependency (a bug: every entry point raises). A replace whose dependsOn names the pending owner it
// supersedes: _admit_one (migrations/committed/000004-one-home-for-every-rule.sql) inserts the new job, moves the key,
// deletes the owner, and only then inserts the new job's dependency edge to that owner, which the foreign key
// job_dependencies_parent refuses: SQLSTATE 23503 escapes add_job(), add_jobs(), queue.add and queue.addBulk, and aborts
// the caller's transaction (DESIGN.md §2.1 and §8: a rejected call leaves nothing behind and no raw SQLSTATE escapes).
// Smallest counterexample (test/admission.property.test.ts pins it):
//   add_job(key k1 ttl) -> #1; add_job(key k1 ttl, replace, depends_on [#1]) -> ERROR 23503 on job_dependencies_parent
// The model answers DESIGN.md's last §2.2 row: REPLACE_HAS_DEPENDENTS with the owner, nothing changes (the new job
// would be a live dependent of the owner it removes). Outside strict mode, an add (or batch item) that would meet it is
// sent without the dependsOn entries naming that owner, so that every other drift still shows.

import { AdmissionModel, type ModelAdd } from './admission-model.js'

const strict = new Set((process.env.PGONCE_PROPERTY_STRICT ?? '').split(',').map((s) => s.trim()))

/** Strict about a replace naming its own superseded owner in dependsOn: sent as drawn, the model's answer expected. */
export const STRICT_REPLACE_OWN_DEPENDENCY = strict.has('1') || strict.has('replace-own-dependency')

/**
 * The adds to send, one after another (a batch's items, or a single add): `reqs` itself, unless (outside strict mode)
 * an item would meet a known bug, in which case that item is sent without what triggers it.
 */
export function avoidKnownBugs(m: AdmissionModel, reqs: readonly ModelAdd[]): { items: ModelAdd[]; avoided: string[] } {
  if (STRICT_REPLACE_OWN_DEPENDENCY) return { items: [...reqs], avoided: [] }
  const sim = new AdmissionModel()
  sim.restore(m.snapshot())
  const avoided: string[] = []
  const items = reqs.map((r) => {
    let req = r
    if (sim.supersedesOwnDependency(r)) {
      const owner = sim.heldOwner((r.dedup as { id: string }).id)
      const deps = (r.dependsOn ?? []).filter((d) => d !== owner)
      const { dependsOn: _, ...rest } = r
      req = deps.length === 0 ? rest : { ...rest, dependsOn: deps }
      avoided.push('replace-own-dependency')
    }
    sim.add(req)
    return req
  })
  return { items, avoided }
}
