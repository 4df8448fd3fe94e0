// dependsOn racing its parent's completion: the child is never stranded in waiting-children (no housekeeping needed).

import pg from 'pg'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { Queue } from '../src/index.js'
import { sqlFor } from '../src/db/sql-files.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'

let db: TestSchema
let adder: Queue<{ n: number }>
let completer: pg.Pool

beforeAll(async () => {
  db = await freshSchema('depends_race')
  adder = new Queue('race', { connectionString: db.url, schema: db.schema, migrate: false })
  completer = new pg.Pool({ connectionString: db.url, max: 2 })
})
afterAll(async () => {
  await adder.close()
  await completer.end()
  await db.drop()
})

it('a child added while its parent completes ends up runnable, whichever commits first', async () => {
  const rounds = 40
  for (let i = 0; i < rounds; i++) {
    const parent = await adder.add('parent', { n: i })
    const {
      rows: [claimed],
    } = await db.pool.query<{ lock_token: string }>(
      `update "${db.schema}".jobs set state = 'active', lock_token = gen_random_uuid(), attempts = 1 where id = $1 returning lock_token`,
      [parent.id],
    )
    // The completion and the child's add race on separate connections.
    const [, child] = await Promise.all([
      completer.query(sqlFor('complete-jobs', db.schema), [[parent.id], [claimed!.lock_token], ['null']]),
      adder.add('child', { n: i }, { dependsOn: [parent.id] }),
    ])
    const {
      rows: [row],
    } = await db.pool.query<{ state: string }>(`select state from "${db.schema}".jobs where id = $1`, [child.id])
    expect(row!.state, `round ${i}`).toBe('waiting')
  }
})
