// Removing a dedup key by hand (queue.removeDeduplicationKey, job.removeDeduplicationKey): one statement, with the
// Redis layer's entry for the key ended around it, with or without `redis` (src/cache/invalidation.ts).

import type { Cache } from './cache/cache.js'
import { endingFacts } from './cache/invalidation.js'
import { dedupFact } from './cache/keys.js'
import { type SettleRow, settleOf } from './cache/settle.js'
import type { Execute } from './db/executor.js'
import { sqlFor } from './db/sql-files.js'

/**
 * Deletes key `key` of `queue` (only while job `jobId` owns it, when given); `inCallerTx`: the statement runs in the
 * caller's transaction. `held`: whether the key was held when it was deleted. Outside a caller's transaction, it
 * returns once no process answers the key from Redis (without `cache`, after the wait its statement asks for).
 */
export async function removeDedupKey(
  execute: Execute,
  cache: Cache | undefined,
  schema: string,
  queue: string,
  key: string,
  jobId: string | null,
  inCallerTx: boolean,
): Promise<{ deleted: boolean; held: boolean }> {
  const [row] = await endingFacts(
    cache,
    () => [dedupFact(queue, key)],
    inCallerTx,
    () =>
      execute<{ deleted: boolean; held: boolean } & SettleRow>(sqlFor('remove-dedup-key', schema), [
        queue,
        key,
        jobId,
        !inCallerTx,
      ]),
    settleOf,
  )
  return { deleted: row?.deleted ?? false, held: row?.held ?? false }
}
