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

let loaded: CommittedMigration[] | undefined

/** The committed migrations in order; throws if a file was edited after it was committed. */
export function committedMigrations(): CommittedMigration[] {
  if (loaded) return loaded
  const dir = join(PACKAGE_ROOT, 'migrations', 'committed')
  const files = readdirSync(dir).filter((f) => /^\d{6}(-[-\w]+)?\.sql$/.test(f)).sort()
  let previous: string | null = null
  loaded = files.map((filename) => {
    const { headers, body } = parse(filename, readFileSync(join(dir, filename), 'utf8'))
    const declaredPrevious = headers.get('Previous') === '-' ? null : (headers.get('Previous') ?? null)
    const hash = headers.get('Hash') as string
    if (declaredPrevious !== previous || (hashOf(body, previous) !== hash && !headers.has('AllowInvalidHash'))) {
      throw new Error(`pgonce: migration ${filename} does not match its hash chain (edited after commit?)`)
    }
    previous = hash
    return { filename, hash, body }
  })
  return loaded
}
