// Writes sql/schema.sql: the schema every migration builds, in one file (`npm run schema`). test/schema-file.test.ts
// fails while the file is stale.

import { readFileSync, writeFileSync } from 'node:fs'
import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { migrate } from '../src/index.js'

const HEADER = `-- The current pgonce schema (schema "pgonce"), generated from migrations/committed by \`npm run schema\`: read it to see
-- the tables, indexes, functions, triggers and views the migrations leave behind. Not applied by anything: migrate()
-- applies the migrations. test/schema-file.test.ts fails when this file is stale.
`

/** The DDL of the schema that the migrations build, with the schema's name written as `pgonce`. */
export async function currentSchemaDdl(connectionString: string): Promise<string> {
  const schema = `schema_dump_${randomBytes(4).toString('hex')}`
  const pool = new pg.Pool({ connectionString, max: 1 })
  try {
    await migrate({ pool, schema })
    const query = readFileSync(new URL('./schema-dump.sql', import.meta.url), 'utf8')
    const { rows } = await pool.query<{ ddl: string }>(query, [schema])
    const text = rows.map((r) => r.ddl).join('\n\n')
    return `${HEADER}\n${text.replaceAll(schema, 'pgonce')}\n`
  } finally {
    await pool.query(`drop schema if exists "${schema}" cascade`).catch(() => {})
    await pool.end()
  }
}

export const SCHEMA_FILE = new URL('../sql/schema.sql', import.meta.url)

if (import.meta.url === `file://${process.argv[1]}`) {
  const { startPostgres } = await import('./postgres-server.js')
  const server = await startPostgres()
  try {
    writeFileSync(SCHEMA_FILE, await currentSchemaDdl(server.url))
    process.stdout.write(`wrote ${SCHEMA_FILE.pathname}\n`)
  } finally {
    await server.stop()
  }
}
