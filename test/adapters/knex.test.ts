// Knex on pg: `knex.transaction` and its nested `trx.transaction` (a savepoint).

import knexFactory, { type Knex } from 'knex'
import { fromKnex } from '../../src/index.js'
import { adapterSuite } from './suite.js'

let knex: Knex

adapterSuite('knex', {
  async open(url) {
    knex = knexFactory({ client: 'pg', connection: url, pool: { min: 0, max: 2 } })
  },
  async close() {
    await knex?.destroy()
  },
  transaction: (fn) => knex.transaction((trx) => fn(trx as never)),
  savepoint: (tx, fn) => (tx as Knex.Transaction).transaction((sp) => fn(sp as never)),
  exec: (tx, text) => (tx as Knex.Transaction).raw(text),
  afterAbort: 'resolves',
  wrap: (tx) => fromKnex(tx),
})
