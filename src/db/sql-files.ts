// Loads the named queries of sql/ and migrations/, with the schema placeholders filled in.

import { existsSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { channelOf } from './identifiers.js'

/** The package root: the nearest folder above this file holding both sql/ and migrations/. */
function findPackageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url))
  for (;;) {
    if (existsSync(join(dir, 'sql')) && existsSync(join(dir, 'migrations'))) return dir
    const parent = dirname(dir)
    if (parent === dir) throw new Error('pgonce: cannot find its sql/ and migrations/ folders')
    dir = parent
  }
}

export const PACKAGE_ROOT = findPackageRoot()

const PLACEHOLDERS = /:PGONCE_(SCHEMA|CHANNEL)\b/g

/** Replaces `:PGONCE_SCHEMA` (quoted identifier) and `:PGONCE_CHANNEL` (string literal); `schema` is allow-listed. */
export function fillPlaceholders(text: string, schema: string): string {
  return text.replace(PLACEHOLDERS, (_, which: string) =>
    which === 'SCHEMA' ? `"${schema}"` : `'${channelOf(schema)}'`,
  )
}

const cache = new Map<string, string>()
const statements = new Map<string, Statement>()

/** Which of pgonce's statements a text is: its sql/ file and the schema it was filled in for. */
export interface Statement {
  name: string
  schema: string
}

/** The text of `sql/<name>.sql` for one schema. */
export function sqlFor(name: string, schema: string): string {
  const key = `${schema}\u0000${name}`
  let text = cache.get(key)
  if (text === undefined) {
    text = fillPlaceholders(readFileSync(join(PACKAGE_ROOT, 'sql', `${name}.sql`), 'utf8'), schema)
    cache.set(key, text)
    statements.set(text, { name, schema })
  }
  return text
}

/** The sql/ file and schema of a statement text (for errors), or null for text pgonce did not read from there. */
export function statementOf(text: string | undefined): Statement | null {
  return (text === undefined ? undefined : statements.get(text)) ?? null
}
