// Drizzle on node-postgres: `db.transaction` and its nested `tx.transaction` (a savepoint).

import { sql as raw } from 'drizzle-orm'
import { type NodePgDatabase, drizzle } from 'drizzle-orm/node-postgres'
import pg from 'pg'
import { fromDrizzle } from '../../src/index.js'
import { adapterSuite } from './suite.js'

type Tx = Parameters<Parameters<NodePgDatabase['transaction']>[0]>[0]
let pool: pg.Pool
let db: NodePgDatabase

adapterSuite('drizzle-node-postgres', {
  async open(url) {
    pool = new pg.Pool({ connectionString: url, max: 2 })
    db = drizzle(pool)
  },
  async close() {
    await pool?.end()
  },
  transaction: (fn) => db.transaction((tx) => fn(tx as never)),
  savepoint: (tx, fn) => (tx as Tx).transaction((sp) => fn(sp as never)),
  exec: (tx, text) => (tx as Tx).execute(raw.raw(text)),
  afterAbort: 'resolves',
  wrap: (tx) => fromDrizzle(tx),
})
