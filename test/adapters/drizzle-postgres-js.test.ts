// Drizzle on postgres.js: `db.transaction` and its nested `tx.transaction` (a savepoint). Drizzle turns the client's
// timestamp parsing off, which the adapter's rows make up for (the retryJob test).

import { sql as raw } from 'drizzle-orm'
import { type PostgresJsDatabase, drizzle } from 'drizzle-orm/postgres-js'
import postgres from 'postgres'
import { fromDrizzle } from '../../src/index.js'
import { adapterSuite } from './suite.js'

type Tx = Parameters<Parameters<PostgresJsDatabase['transaction']>[0]>[0]
let client: postgres.Sql
let db: PostgresJsDatabase

adapterSuite('drizzle-postgres-js', {
  async open(url) {
    client = postgres(url, { max: 2, onnotice: () => {} })
    db = drizzle(client)
  },
  async close() {
    await client?.end()
  },
  transaction: (fn) => db.transaction((tx) => fn(tx as never)),
  savepoint: (tx, fn) => (tx as Tx).transaction((sp) => fn(sp as never)),
  exec: (tx, text) => (tx as Tx).execute(raw.raw(text)),
  afterAbort: 'rejects',
  wrap: (tx) => fromDrizzle(tx),
})
