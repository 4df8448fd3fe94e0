// The add side of a system whose Queue has BullMQ's shape (pgonce follows it): add, addBulk, deduplication with a TTL.

import type { BenchSystem, JobData } from './system.js'

/** How long a W5/W7 dedup key is held: longer than any run. */
export const DEDUP_TTL_MS = 3_600_000

export interface BullStyleQueue {
  add(name: string, data: JobData, opts?: { deduplication: { id: string; ttl: number } }): Promise<unknown>
  addBulk(jobs: { name: string; data: JobData }[]): Promise<unknown>
}

export function bullStyleAdds(
  queueFor: (name: string) => BullStyleQueue,
): Pick<BenchSystem, 'add' | 'addBulk' | 'addDeduplicated'> {
  return {
    async add(name, data) {
      await queueFor(name).add('job', data)
    },
    async addBulk(name, batch) {
      await queueFor(name).addBulk(batch.map((data) => ({ name: 'job', data })))
    },
    async addDeduplicated(name, key, data) {
      await queueFor(name).add('job', data, { deduplication: { id: key, ttl: DEDUP_TTL_MS } })
    },
  }
}
