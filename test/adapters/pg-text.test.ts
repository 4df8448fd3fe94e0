// pgText (src/db/adapters/pg-text.ts) sends a value as the text pg sends for it: for each value and type, the server
// reads the same thing from pgText's text as from pg's own encoding of the value.

import pg from 'pg'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { pgText } from '../../src/db/adapters/pg-text.js'
import { databaseUrl } from '../helpers/schema.js'

let client: pg.Client

beforeAll(async () => {
  client = new pg.Client({ connectionString: databaseUrl() })
  await client.connect()
})
afterAll(async () => {
  await client.end()
})

const awkward = ['', ' ', 'NULL', 'null', '"', '\\', '\\"', '{', '}', ',', "'", 'a,b', '{"a":1}', 'ü𝄞日本', '\t\n']

const cases: [string, unknown][] = [
  ['text[]', awkward],
  ['text[]', [null, 'x', null]],
  ['text[]', []],
  ['text[]', [null]],
  ['bigint[]', [1, '9007199254740993', -5, null]],
  ['bigint[]', [10n ** 18n]],
  ['integer[]', [2_147_483_647, null]],
  ['float8[]', [0.1, 1e300, -0]],
  ['boolean[]', [true, false, null]],
  ['jsonb[]', ['{"a":[1,2]}', 'null', '"s"', null]],
  ['jsonb', '{"k":"ü \\" \\\\ {}"}'],
  [
    'text[][]',
    [
      ['a', 'b'],
      ['{', null],
    ],
  ],
  ['bigint', 2n ** 62n],
  ['float8', 1.5],
  ['boolean', false],
  ['text', awkward.join('|')],
]

for (const [i, [type, value]] of cases.entries()) {
  it(`${type}, case ${i}: the server reads the same from pgText as from pg`, async () => {
    const { rows } = await client.query(`select $1::${type} is not distinct from $2::${type} as same`, [
      pgText(value),
      value,
    ])
    expect(rows[0]).toEqual({ same: true })
  })
}

it('null and undefined are NULL', () => {
  expect(pgText(null)).toBeNull()
  expect(pgText(undefined)).toBeNull()
})
