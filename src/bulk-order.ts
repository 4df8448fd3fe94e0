// The order in which add_jobs() admits a batch: no deadlocks between concurrent batches, sequential answers within one.

import type { AddRequest } from './add-request.js'

function lockKeys(r: AddRequest): string[] {
  const keys: string[] = []
  if (r.jobId !== null) keys.push(`j:${r.jobId}`)
  if (r.dedupId !== null) keys.push(`k:${r.dedupId}`)
  return keys
}

/**
 * Indices of `reqs` in admission order. Plain items (no jobId, key or
 * dependency) come first; they lock nothing another batch waits for. Keyed
 * items that share a jobId or key, directly or through others, form a group
 * that keeps its input order, so repeats are answered as if added one after
 * another. Groups are sorted by their least lock key, so two batches lock the
 * rows they share in the same order.
 */
export function admissionOrder(reqs: readonly AddRequest[]): number[] {
  const parent = reqs.map((_, i) => i)
  const find = (i: number): number => {
    while (parent[i] !== i) {
      parent[i] = parent[parent[i] as number] as number
      i = parent[i] as number
    }
    return i
  }
  const owner = new Map<string, number>()
  const plain: number[] = []
  const keyed: number[] = []
  reqs.forEach((r, i) => {
    const keys = lockKeys(r)
    if (keys.length === 0 && r.dependsOn === null) {
      plain.push(i)
      return
    }
    keyed.push(i)
    for (const key of keys) {
      const other = owner.get(key)
      if (other === undefined) owner.set(key, i)
      else parent[find(i)] = find(other)
    }
  })
  const least = new Map<number, string>()
  for (const i of keyed) {
    const root = find(i)
    for (const key of lockKeys(reqs[i] as AddRequest)) {
      const current = least.get(root)
      if (current === undefined || key < current) least.set(root, key)
    }
  }
  const groupKey = (i: number) => least.get(find(i)) ?? ''
  keyed.sort((a, b) => {
    const ka = groupKey(a)
    const kb = groupKey(b)
    return ka < kb ? -1 : ka > kb ? 1 : find(a) - find(b) || a - b
  })
  return [...plain, ...keyed]
}
