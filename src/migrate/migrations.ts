// Reads graphile-migrate's committed migrations shipped in migrations/committed and checks their hash chain.

import { createHash } from 'node:crypto'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { PACKAGE_ROOT } from '../db/sql-files.js'

export interface CommittedMigration {
  filename: string
  hash: string
  body: string
}

// graphile-migrate's hash: sha1 over the previous hash, a newline and the trimmed body.
function hashOf(body: string, previous: string | null): string {
  const text = `${((previous ?? '') + '\n' + body.trim()).trim()}\n`
  return `sha1:${createHash('sha1').update(text).digest('hex')}`
}

function parse(filename: string, text: string): { headers: Map<string, string>; body: string } {
  const lines = text.split('\n')
  const headers = new Map<string, string>()
  let i = 0
  for (; i < lines.length; i++) {
    const m = /^--! ([A-Z][a-zA-Z0-9_]*)(?::(.*))?$/.exec(lines[i] ?? '')
    if (!m) break
    headers.set(m[1] as string, (m[2] ?? '').trim())
  }
  if (!headers.has('Hash') || !headers.has('Previous')) {
    throw new Error(`pgonce: migration ${filename} lacks its graphile-migrate headers`)
  }
  return { headers, body: `${lines.slice(i).join('\n').trim()}\n` }
}

/** The 6-digit number a migration's filename starts with (graphile-migrate's `000001.sql` or `000001-message.sql`). */
export function migrationNumber(filename: string): string | undefined {
  return /^(\d{6})(?:-[-\w]+)?\.sql$/.exec(filename)?.[1]
}

/**
 * The migrations of `dir` in order; throws if a file was edited after it was committed, naming the hash its body
 * has, or if the files do not chain.
 */
export function readMigrations(dir: string): CommittedMigration[] {
  const files = readdirSync(dir)
    .filter((f) => migrationNumber(f) !== undefined)
    .sort()
  let previous: string | null = null
  return files.map((filename) => {
    const { headers, body } = parse(filename, readFileSync(join(dir, filename), 'utf8'))
    const declaredPrevious = headers.get('Previous') === '-' ? null : (headers.get('Previous') ?? null)
    const hash = headers.get('Hash') as string
    const computed = hashOf(body, previous)
    if (declaredPrevious !== previous || (computed !== hash && !headers.has('AllowInvalidHash'))) {
      throw new Error(
        `pgonce: migration ${filename} does not match its hash chain (edited after commit?): ` +
          `Previous should be ${previous ?? '-'}, and its body after that hashes to ${computed}`,
      )
    }
    previous = hash
    return { filename, hash, body }
  })
}

let loaded: CommittedMigration[] | undefined

/** The committed migrations in order; throws if a file was edited after it was committed. */
export function committedMigrations(): CommittedMigration[] {
  loaded ??= readMigrations(join(PACKAGE_ROOT, 'migrations', 'committed'))
  return loaded
}
