// The catalog of one schema as rows to compare (test/helpers/catalog.sql), its name written as `:PGONCE_SCHEMA`.

import { readFileSync } from 'node:fs'
import type pg from 'pg'

export interface CatalogEntry {
  kind: string
  name: string
  def: string
}

const QUERY = readFileSync(new URL('./catalog.sql', import.meta.url), 'utf8')

/**
 * Every object of `schema` and its definition, in a stable order. The number of rows of `migrations` is left out: it
 * records how the schema was built, which is what two schemas compared this way differ in.
 */
export async function catalogOf(pool: pg.Pool | pg.PoolClient, schema: string): Promise<CatalogEntry[]> {
  const { rows } = await pool.query<CatalogEntry>(QUERY, [schema])
  return rows
    .filter((r) => !(r.kind === 'rows' && r.name === 'migrations'))
    .map((r) => ({
      kind: r.kind,
      name: r.name.replaceAll(schema, ':PGONCE_SCHEMA'),
      def: r.def.replaceAll(schema, ':PGONCE_SCHEMA'),
    }))
}
