// Whether a worker of a queue sleeps, as an add sees it: one of the queue's idle slots is held (_idle_worker_waits).

import type { TestSchema } from './schema.js'
import { waitFor } from './wait.js'

/** True while some worker holds one of `queue`'s idle slots (it sleeps, and an add would NOTIFY it). */
export async function idleSlotHeld(db: TestSchema, queue: string): Promise<boolean> {
  const { rows } = await db.pool.query<{ waits: boolean }>(`select "${db.schema}"._idle_worker_waits($1) as waits`, [
    queue,
  ])
  return rows[0]!.waits
}

/** Waits until a worker of `queue` sleeps (holds an idle slot), or, with `held: false`, until none does. */
export async function waitForIdleSlot(db: TestSchema, queue: string, held = true, timeoutMs = 5_000): Promise<void> {
  await waitFor(
    async () => (await idleSlotHeld(db, queue)) === held,
    timeoutMs,
    held ? `a worker of ${queue} to hold an idle slot` : `no worker of ${queue} to hold an idle slot`,
  )
}
