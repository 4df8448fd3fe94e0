// TypeORM on postgres: `dataSource.transaction(async (manager) => …)`, a nested transaction on the same manager (a
// savepoint), and a QueryRunner through the named helper.

import 'reflect-metadata'
import { DataSource, type EntityManager } from 'typeorm'
import { fromTypeORM } from '../../src/index.js'
import { adapterSuite } from './suite.js'

let dataSource: DataSource

adapterSuite('typeorm', {
  async open(url) {
    dataSource = new DataSource({ type: 'postgres', url, poolSize: 2, entities: [], logging: false })
    await dataSource.initialize()
  },
  async close() {
    await dataSource?.destroy()
  },
  transaction: (fn) => dataSource.transaction((manager) => fn(manager as never)),
  savepoint: (tx, fn) => (tx as EntityManager).transaction((sp) => fn(sp as never)),
  exec: (tx, text) => (tx as EntityManager).query(text),
  // The helper wraps the manager's QueryRunner: the same transaction, reached through the other accepted handle.
  afterAbort: 'resolves',
  wrap: (tx) => fromTypeORM((tx as EntityManager).queryRunner!),
})
