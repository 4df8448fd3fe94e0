// runOnce and the ledger with the Redis layer: a done claim or a recorded effect answered from Redis; remembered once its commit is in.

import { sqlFor } from '../db/sql-files.js'
import type { Cache } from './cache.js'
import { type Fact, claimFact, ledgerFact } from './keys.js'

interface EntryRow {
  expires_ms: number | null
  epoch: string
  now_ms: number
}

/**
 * The execution side of the cache: `effects.runOnce` / `ctx.runOnce` keys that are done (until their doneTtl), and
 * `ctx.effect` / `effects.record` keys in the ledger (for ever, or until ledger retention could prune them). Entries
 * are written when Postgres answered a repeat ('duplicate-done'), from a read made after that (sql/cache-claim-entry.sql,
 * sql/cache-ledger-entry.sql), in the background: the call does not wait for Redis.
 */
export class EffectsCache {
  constructor(readonly cache: Cache) {}

  /** True when `key` is known done: `'duplicate-done'` without a claim. */
  async claimDone(key: string): Promise<boolean> {
    return (await this.cache.lookup(claimFact(key))) !== null
  }

  /** True when `key` is known recorded in the ledger: the effect is skipped without a transaction. */
  async effectRecorded(key: string): Promise<boolean> {
    return (await this.cache.lookup(ledgerFact(key))) !== null
  }

  /** After Postgres answered runOnce 'duplicate-done': remember the done marker. */
  rememberClaim(key: string): void {
    this.rememberFrom('cache-claim-entry', claimFact(key), key)
  }

  /** After ctx.effect found `key` in the ledger, recorded by a transaction that committed: remember it. */
  rememberEffect(key: string): void {
    this.rememberFrom('cache-ledger-entry', ledgerFact(key), key)
  }

  private rememberFrom(query: string, fact: Fact, key: string): void {
    const { cache } = this
    if (!cache.writable) return
    cache.background(
      (async () => {
        const sent = cache.clock.mark()
        const [row] = await cache.execute<EntryRow>(sqlFor(query, cache.schema), [key])
        if (row === undefined) return
        cache.clock.sample(sent, row.now_ms)
        cache.remember(
          fact,
          Number(row.epoch),
          '',
          row.expires_ms === null ? null : Number(row.expires_ms),
          Number(row.now_ms),
        )
      })(),
    )
  }
}
