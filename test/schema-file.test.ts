// sql/schema.sql is the schema the migrations build, in one file: this fails when a migration changed it and nobody ran
// `npm run schema`.

import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { SCHEMA_FILE, currentSchemaDdl } from '../dev/schema-dump.js'
import { databaseUrl } from './support/schema.js'

describe('sql/schema.sql', () => {
  it('is what the committed migrations build (run `npm run schema` after a migration)', async () => {
    const expected = await currentSchemaDdl(databaseUrl())
    expect(readFileSync(SCHEMA_FILE, 'utf8')).toBe(expected)
  })
})
