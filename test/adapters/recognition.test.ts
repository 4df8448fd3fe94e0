// Which `tx` pgonce takes (docs/transactions.md): the named helpers refuse another library's handle, an unknown `tx`
// is refused before any I/O with a message naming what is accepted, and a Knex instance or a DataSource's own
// EntityManager (no transaction) commits each add on its own.

import 'reflect-metadata'
import knexFactory from 'knex'
import pg from 'pg'
import postgres from 'postgres'
import { DataSource } from 'typeorm'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  Queue,
  ValidationError,
  fromDrizzle,
  fromKnex,
  fromPostgresJs,
  fromPrisma,
  fromTypeORM,
} from '../../src/index.js'
import { type TestSchema, freshSchema } from '../helpers/schema.js'

let db: TestSchema
let queue: Queue<{ n: number }>

beforeAll(async () => {
  db = await freshSchema('adapters_recognition')
  queue = new Queue('recognition', { connectionString: db.url, schema: db.schema, poolSize: 1 })
})
afterAll(async () => {
  await queue.close()
  await db.drop()
})

const committed = async (name: string): Promise<number> =>
  (await db.pool.query(`select count(*)::int as n from "${db.schema}".jobs where name = $1`, [name])).rows[0].n

describe('which tx pgonce takes', () => {
  it('an unknown tx is refused before any I/O, naming every accepted kind', async () => {
    const err = await queue.add('x', { n: 1 }, { tx: { execute: () => [] } as never }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(ValidationError)
    expect(err).toMatchObject({ code: 'INVALID_TYPE', field: 'opts.tx' })
    for (const name of ['pg', 'Kysely', 'Drizzle', 'Prisma', 'postgres.js', 'Knex', 'TypeORM', 'fromDrizzle']) {
      expect((err as Error).message).toContain(name)
    }
    expect(await committed('x')).toBe(0)
  })

  it("each named helper refuses another library's handle with a TypeError", () => {
    const pool = new pg.Pool({ connectionString: db.url, max: 1 })
    const sql = postgres(db.url, { max: 1 })
    try {
      expect(() => fromDrizzle(pool as never)).toThrow(/fromDrizzle: expected a Drizzle/)
      expect(() => fromPrisma(pool as never)).toThrow(/fromPrisma/)
      expect(() => fromKnex(sql as never)).toThrow(/fromKnex/)
      expect(() => fromTypeORM(pool as never)).toThrow(/fromTypeORM/)
      expect(() => fromPostgresJs(pool as never)).toThrow(/fromPostgresJs/)
    } finally {
      void pool.end()
      void sql.end()
    }
  })

  it('a Knex instance and a DataSource manager outside a transaction commit each add on their own', async () => {
    const knex = knexFactory({ client: 'pg', connection: db.url, pool: { min: 0, max: 1 } })
    const dataSource = new DataSource({ type: 'postgres', url: db.url, poolSize: 1, entities: [] })
    await dataSource.initialize()
    try {
      await queue.add('knex-instance', { n: 1 }, { tx: knex })
      await queue.add('typeorm-manager', { n: 1 }, { tx: dataSource.manager })
      expect(await committed('knex-instance')).toBe(1)
      expect(await committed('typeorm-manager')).toBe(1)
    } finally {
      await knex.destroy()
      await dataSource.destroy()
    }
  })
})
