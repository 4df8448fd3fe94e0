// The package as a user installs it: `npm pack` (its prepack build) in a copy of the repository, the tarball installed
// into a scratch app, and that app's code run against real PostgreSQL: the JavaScript API, the types (a strict
// TypeScript consumer), and the `pgonce` bin. pgonce is not published yet; this is what `npm install pgonce` will be.

import { execFile } from 'node:child_process'
import { cpSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { type TestSchema, freshSchema } from './support/schema.js'

const exec = promisify(execFile)
/** Runs a command; a failure's message carries what it printed (tsc reports its errors on stdout). */
async function run(file: string, args: string[], options: { cwd: string; env?: NodeJS.ProcessEnv }): Promise<{ stdout: string }> {
  try {
    return await exec(file, args, options)
  } catch (err) {
    const e = err as Error & { stdout?: string; stderr?: string }
    throw new Error(`${file} ${args.join(' ')} failed:\n${e.stdout ?? ''}${e.stderr ?? ''}`)
  }
}
const ROOT = join(import.meta.dirname, '..')
const TSC = join(ROOT, 'node_modules', '.bin', 'tsc')

let db: TestSchema
let work: string
let app: string

beforeAll(async () => {
  db = await freshSchema('packed')
  work = mkdtempSync(join(tmpdir(), 'pgonce-pack-'))
  // A copy of what the package is built from (the repository's own dist/ is never touched).
  const repo = join(work, 'repo')
  mkdirSync(repo)
  for (const f of ['src', 'sql', 'migrations', 'README.md', 'package.json', 'tsconfig.json', 'tsconfig.build.json']) {
    cpSync(join(ROOT, f), join(repo, f), { recursive: true })
  }
  symlinkSync(join(ROOT, 'node_modules'), join(repo, 'node_modules'))
  await run('npm', ['pack', '--pack-destination', work], { cwd: repo })
  const tarball = readdirSync(work).find((f) => f.endsWith('.tgz'))
  if (tarball === undefined) throw new Error('npm pack made no tarball')

  app = join(work, 'app')
  mkdirSync(app)
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'scratch-app', version: '1.0.0', type: 'module', private: true }))
  await run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', join(work, tarball), '@types/node@20'], { cwd: app })
}, 180_000)
afterAll(async () => {
  if (work !== undefined) rmSync(work, { recursive: true, force: true })
  await db?.drop()
})

it('installs from its tarball with only its dependencies, and ships no tests, benchmarks or TypeScript sources', async () => {
  const installed = join(app, 'node_modules', 'pgonce')
  const top = readdirSync(installed).sort()
  expect(top).toEqual(['README.md', 'dist', 'migrations', 'package.json', 'sql'])
  expect(readdirSync(join(installed, 'dist'))).toEqual(['src'])
})

it('runs a TypeScript app against it: migrate, add twice with one jobId, a worker runs the job once', async () => {
  writeFileSync(join(app, 'main.ts'), `
import { Queue, Worker, ValidationError, migrate, type Job } from 'pgonce'

const url = process.env.DATABASE_URL as string
const schema = process.env.SCHEMA as string
await migrate({ connectionString: url, schema })
const queue = new Queue<{ to: string }>('emails', { connectionString: url, schema })
const first = await queue.add('welcome', { to: 'ada@example.com' }, { jobId: 'welcome:ada' })
const again = await queue.add('welcome', { to: 'ada@example.com' }, { jobId: 'welcome:ada' })
let bad = ''
try {
  await queue.add('', { to: 'x' })
} catch (err) {
  if (err instanceof ValidationError) bad = err.field
}
const ran: string[] = []
const worker = new Worker<{ to: string }>('emails', async (job: Job<{ to: string }>) => {
  ran.push(job.data.to)
}, { connectionString: url, schema })
while (ran.length === 0) await new Promise((resolve) => setTimeout(resolve, 20))
await worker.close()
await queue.close()
console.log(JSON.stringify({ first: first.outcome, again: again.outcome, same: first.id === again.id, bad, ran }))
`)
  writeFileSync(join(app, 'tsconfig.json'), JSON.stringify({
    compilerOptions: { target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, outDir: 'out', skipLibCheck: false },
    include: ['main.ts'],
  }))
  await run(TSC, ['-p', 'tsconfig.json'], { cwd: app })
  const { stdout } = await run('node', [join(app, 'out', 'main.js')], { cwd: app, env: { ...process.env, DATABASE_URL: db.url, SCHEMA: db.schema } })
  expect(JSON.parse(stdout)).toEqual({ first: 'added', again: 'duplicate-job-id', same: true, bad: 'name', ran: ['ada@example.com'] })
}, 60_000)

it('has the pgonce bin: stats --json reads the queue the app used', async () => {
  const { stdout } = await run(join(app, 'node_modules', '.bin', 'pgonce'), ['stats', '--json', '--schema', db.schema, '--database-url', db.url], { cwd: app })
  const stats = JSON.parse(stdout) as { queues: { queue: string; counts: Record<string, number> }[] }
  expect(stats.queues.find((r) => r.queue === 'emails')).toMatchObject({ queue: 'emails', counts: { completed: 1, waiting: 0, active: 0 } })
}, 30_000)
