// The dashboard's one small pool, and how every statement runs on it: under the dashboard's statement_timeout.

import type pg from 'pg'
import { openPool } from '../../db/connection.js'
import { closeWithin, type PgoncePool } from '../../db/pool.js'
import { sqlFor } from '../../db/sql-files.js'
import { Queue } from '../../queue.js'
import type { ResolvedOptions } from './options.js'

/** At most this many connections: a dashboard is a few people polling, not a worker. */
export const POOL_SIZE = 3

export class DashboardDb {
  readonly schema: string
  readonly #pool: pg.Pool
  readonly #owned: PgoncePool | null
  readonly #statementTimeoutMs: number
  readonly #closeBoundMs: number
  readonly #queues = new Map<string, Queue>()
  readonly #logger: ResolvedOptions['logger']

  constructor(opts: ResolvedOptions) {
    this.schema = opts.schema
    this.#logger = opts.logger
    this.#statementTimeoutMs = opts.statementTimeoutMs
    const { pool, owned, bounds } =
      opts.pool !== undefined
        ? openPool({ pool: opts.pool }, opts.logger)
        : openPool(
            {
              connectionString: opts.connectionString,
              connectTimeoutMs: opts.connectTimeoutMs,
              statementTimeoutMs: opts.statementTimeoutMs,
            },
            opts.logger,
            POOL_SIZE,
          )
    this.#pool = pool
    this.#owned = owned
    this.#closeBoundMs = bounds.answerMs
  }

  /**
   * Runs `sql/<name>.sql` with bound values. On the dashboard's own pool the connections carry the statement_timeout;
   * on a pool you passed, the statement runs in a transaction that sets it locally (two more round trips).
   */
  async query<R extends object>(name: string, values: readonly unknown[]): Promise<R[]> {
    const text = sqlFor(name, this.schema)
    if (this.#owned !== null) return (await this.#pool.query(text, values as unknown[])).rows as R[]
    const client = await this.#pool.connect()
    let broken = false
    try {
      await client.query('begin read only')
      await client.query(`select set_config('statement_timeout', $1, true)`, [String(this.#statementTimeoutMs)])
      const { rows } = await client.query(text, values as unknown[])
      await client.query('commit')
      return rows as R[]
    } catch (err) {
      await client.query('rollback').catch(() => (broken = true))
      throw err
    } finally {
      client.release(broken)
    }
  }

  /** A connection of the pool for a transaction of your own (release it). */
  connect(): Promise<pg.PoolClient> {
    return this.#pool.connect()
  }

  /** The Queue of that name on the dashboard's pool (no migration): actions go through its methods. */
  queue(name: string): Queue {
    let q = this.#queues.get(name)
    if (q === undefined) {
      q = new Queue(name, { pool: this.#pool, schema: this.schema, migrate: false, logger: this.#logger })
      // Names come from the database or the allow-list, but bound the map all the same.
      if (this.#queues.size >= 1_000) this.#queues.clear()
      this.#queues.set(name, q)
    }
    return q
  }

  async close(): Promise<void> {
    const queues = [...this.#queues.values()]
    this.#queues.clear()
    await closeWithin(
      this.#closeBoundMs,
      async () => {
        await Promise.all(queues.map((q) => q.close()))
        await this.#owned?.end()
      },
      () => this.#owned?.abandon(),
    )
  }
}
