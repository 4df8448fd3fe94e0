// postgres.js: `sql.begin` and `sql.savepoint`, recognised by shape or wrapped by fromPostgresJs.

import postgres from 'postgres'
import { fromPostgresJs } from '../../src/index.js'
import { adapterSuite } from './suite.js'

let sql: postgres.Sql

adapterSuite('postgres-js', {
  async open(url) {
    sql = postgres(url, { max: 2, onnotice: () => {} })
  },
  async close() {
    await sql?.end()
  },
  async transaction(fn) {
    return await sql.begin((tx) => fn(tx as never))
  },
  async savepoint(tx, fn) {
    return await (tx as postgres.TransactionSql).savepoint((sp) => fn(sp as never))
  },
  exec: (tx, text) => (tx as postgres.TransactionSql).unsafe(text),
  afterAbort: 'rejects',
  wrap: (tx) => fromPostgresJs(tx),
})
