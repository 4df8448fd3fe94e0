// The package as a user installs it: `npm pack` (its prepack build) in a copy of the repository, the tarball installed
// into a scratch app, and that app run against real PostgreSQL the ways users run it: ESM, CommonJS, a strict
// TypeScript consumer (with the README's tour, ioredis and Drizzle), a webpack development build,
// `node --conditions=development`, the `pgonce` bin, and the same app on Node.js 22 and Bun (test/compat/package.json
// installs both from the npm registry). Also what the tarball holds: no TypeScript sources, the documents its links
// name, no internal members in its types. pgonce is not published yet; this is what `npm install pgonce` will be.

import { existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import webpack from 'webpack'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  type PackedApp,
  filesUnder,
  internalMembers,
  markdownLinks,
  packAndInstall,
  run,
} from './helpers/packed-app.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'

const ROOT = join(import.meta.dirname, '..')
const TSC = join(ROOT, 'node_modules', '.bin', 'tsc')
const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  peerDependencies: Record<string, string>
  devDependencies: Record<string, string>
}
/** The lowest ioredis the peer range admits: its types must compile in a strict consumer too. */
const lowestIoredis = /\d+\.\d+\.\d+/.exec(manifest.peerDependencies.ioredis ?? '')?.[0]
/** The Drizzle the transaction adapters are tested with (test/adapters). */
const DRIZZLE = 'drizzle-orm@0.45.4'
/** Other runtimes, installed by `npm ci` in test/compat (.ci/run does; REQUIRE_COMPAT=1 makes their absence fail). */
const COMPAT = join(ROOT, 'test', 'compat', 'node_modules')
const runtimes = [
  { name: 'Node.js 22', bin: join(COMPAT, 'node22', 'bin', 'node'), version: /^v22\./ },
  { name: 'Bun', bin: join(COMPAT, 'bun', 'bin', 'bun.exe'), version: /^1\./ },
].map((r) => ({ ...r, missing: existsSync(r.bin) ? null : `${r.bin} is not installed (npm ci in test/compat)` }))

let db: TestSchema
let packed: PackedApp
let installed: string
let env: NodeJS.ProcessEnv

beforeAll(async () => {
  db = await freshSchema('packed')
  // What a user adds beside pgonce: pg (the README's install line), kysely (the tour's Kysely block), ioredis, Drizzle.
  packed = await packAndInstall(ROOT, [
    'pg',
    `kysely@${manifest.devDependencies.kysely}`,
    `ioredis@${lowestIoredis}`,
    DRIZZLE,
    '@types/node@20',
  ])
  installed = join(packed.app, 'node_modules', 'pgonce')
  env = { ...process.env, DATABASE_URL: db.url, SCHEMA: db.schema }
}, 180_000)
afterAll(async () => {
  packed?.remove()
  await db?.drop()
})

/** An app's module that adds a job to `queue` and prints its outcome; `pgonce` is whatever the app's loader gives. */
const addOne = (queue: string): string => `
const url = process.env.DATABASE_URL, schema = process.env.SCHEMA
const queue = new pgonce.Queue(${JSON.stringify(queue)}, { connectionString: url, schema })
const job = await queue.add('welcome', { to: 'ada@example.com' })
await queue.close()
console.log(JSON.stringify({ outcome: job.outcome, state: job.state }))
`

/** Compiles `files` of the app with tsc, strict and with skipLibCheck off, into out/. */
async function compileStrict(tsconfig: string, files: string[]): Promise<void> {
  const errors = await strictErrors(tsconfig, files)
  if (errors.length > 0) throw new Error(`tsc -p ${tsconfig}:\n${errors.join('\n')}`)
}

/** The errors of tsc on `files` of the app, strict and with skipLibCheck off (what it emits goes to out/). */
async function strictErrors(tsconfig: string, files: string[]): Promise<string[]> {
  const compilerOptions = {
    target: 'ES2022',
    module: 'NodeNext',
    moduleResolution: 'NodeNext',
    strict: true,
    outDir: 'out',
    skipLibCheck: false,
  }
  writeFileSync(join(packed.app, tsconfig), JSON.stringify({ compilerOptions, files }))
  try {
    await run(TSC, ['-p', tsconfig], { cwd: packed.app })
    return []
  } catch (err) {
    const errors = (err as Error).message.split('\n').filter((l) => /^\S+\(\d+,\d+\): error /.test(l))
    if (errors.length === 0) throw err
    return errors
  }
}

it("ships its build (the dashboard's UI built too), SQL, migrations and documents, and no TypeScript source, test or benchmark", () => {
  expect(readdirSync(installed).sort()).toEqual(['README.md', 'dist', 'docs', 'migrations', 'package.json', 'sql'])
  expect(readdirSync(join(installed, 'dist')).sort()).toEqual(['dashboard-ui', 'src'])
  expect(readdirSync(join(installed, 'dist', 'dashboard-ui')).sort()).toEqual(['app.css', 'app.js', 'index.html'])
  expect(filesUnder(installed).filter((f) => /\.[cm]?tsx?$/.test(f) && !f.endsWith('.d.ts'))).toEqual([])
})

it('names its repository and homepage, and every export, main and bin target is a file it ships', () => {
  const pkg = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')) as Record<string, unknown>
  expect(pkg.repository).toMatchObject({ type: 'git', url: expect.stringMatching(/^git\+https:\/\/github\.com\//) })
  expect(pkg.homepage).toMatch(/^https:\/\//)
  const targets: string[] = [pkg.main, pkg.types, ...Object.values(pkg.bin as object)] as string[]
  const collect = (value: unknown): void => {
    if (typeof value === 'string') targets.push(value)
    else if (value !== null && typeof value === 'object') Object.values(value).forEach(collect)
  }
  collect(pkg.exports)
  expect(targets.filter((t) => !filesUnder(installed).includes(t.replace(/^\.\//, '')))).toEqual([])
})

it("links between its documents resolve inside the package; the rest go to the repository's bench/ and examples/", () => {
  const markdown = readdirSync(join(installed, 'docs')).filter((f) => f.endsWith('.md'))
  const documents = ['README.md', ...markdown.map((f) => `docs/${f}`)]
  const links = documents.flatMap((doc) => markdownLinks(installed, doc))
  expect(links.filter((l) => l.target.startsWith('docs/')).length).toBeGreaterThan(20)
  const outside = links.filter((l) => !filesUnder(installed).includes(l.target))
  expect(outside.filter((l) => !/^(bench|examples)\//.test(l.target))).toEqual([])
})

it('keeps the members its sources mark @internal out of its declaration files', () => {
  const internal = internalMembers(join(ROOT, 'src'))
  expect(internal.map((m) => m.name)).toEqual(
    expect.arrayContaining(['removeOwnedDeduplicationKey', 'knownRecorded', 'recordInLedger', 'repeatedEffect']),
  )
  const leaked = internal.filter(({ file, name }) => {
    const declarations = readFileSync(join(installed, 'dist', 'src', file.replace(/\.ts$/, '.d.ts')), 'utf8')
    return new RegExp(`^\\s*(?:(?:protected|public|static|readonly|get|set)\\s+)*${name}\\s*[(<?:;]`, 'm').test(
      declarations,
    )
  })
  expect(leaked).toEqual([])
})

it('compiles in a strict TypeScript app (skipLibCheck off): an ESM program, a CommonJS module, the README tour, ioredis and Drizzle', async () => {
  const readme = readFileSync(join(installed, 'README.md'), 'utf8')
  const tour = readme.slice(readme.indexOf('## A five-minute tour'), readme.indexOf('## Guarantees'))
  const blocks = [...tour.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1] as string)
  expect(blocks.length).toBe(4)
  const [withPg, withKysely, dedup, worker] = blocks as [string, string, string, string]
  // The names the tour takes for granted, typed as an app would type them.
  writeFileSync(
    join(packed.app, 'tour.ts'),
    `
import { CamelCasePlugin, Kysely, PostgresDialect, type Generated } from 'kysely'
import { Redis } from 'ioredis'
interface Database { comments: { id: Generated<number>; postId: number; authorId: number; body: string } }
declare const postId: number, authorId: number, body: string, postOwnerId: number, userId: number, commentId: number
${withPg}
const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }), plugins: [new CamelCasePlugin()] })
${withKysely}
${dedup}
${worker}
new Queue('cached', { pool, redis: new Redis({ lazyConnect: true }) })
`,
  )
  writeFileSync(
    join(packed.app, 'main.ts'),
    `
import { Queue, Worker, ValidationError, migrate, type Job } from 'pgonce'

const url = process.env.DATABASE_URL as string
const schema = process.env.SCHEMA as string
const name = process.env.QUEUE ?? 'emails'
await migrate({ connectionString: url, schema })
const queue = new Queue<{ to: string }>(name, { connectionString: url, schema })
const first = await queue.add('welcome', { to: 'ada@example.com' }, { jobId: 'welcome:ada' })
const again = await queue.add('welcome', { to: 'ada@example.com' }, { jobId: 'welcome:ada' })
let bad = ''
try {
  await queue.add('', { to: 'x' })
} catch (err) {
  if (err instanceof ValidationError) bad = err.field
}
const ran: string[] = []
const worker = new Worker<{ to: string }>(name, async (job: Job<{ to: string }>) => {
  ran.push(job.data.to)
}, { connectionString: url, schema })
while (ran.length === 0) await new Promise((resolve) => setTimeout(resolve, 20))
await worker.close()
await queue.close()
console.log(JSON.stringify({ first: first.outcome, again: again.outcome, same: first.id === again.id, bad, ran }))
`,
  )
  writeFileSync(
    join(packed.app, 'common.cts'),
    `import * as pgonce from 'pgonce'\nasync function main(): Promise<void> {\n${addOne('cjs')}\n}\nvoid main()\n`,
  )
  // A Drizzle transaction as db.transaction hands it over, in the app that adds a job.
  writeFileSync(
    join(packed.app, 'drizzle.ts'),
    `
import pg from 'pg'
import { sql } from 'drizzle-orm'
import { drizzle, type NodePgDatabase } from 'drizzle-orm/node-postgres'
import { Queue, fromDrizzle } from 'pgonce'

type DrizzleTx = Parameters<Parameters<NodePgDatabase['transaction']>[0]>[0]
const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL })
const db: NodePgDatabase = drizzle({ client: pool })
const welcome = new Queue<{ to: string }>('welcome', { pool })
export async function signUp(to: string): Promise<string> {
  return db.transaction(async (tx: DrizzleTx) => {
    await tx.execute(sql\`select \${to}::text\`)
    // The add commits or rolls back with the Drizzle transaction (docs/transactions.md).
    return (await welcome.add('welcome', { to }, { tx: fromDrizzle(tx) })).id
  })
}
`,
  )
  // drizzle-orm 0.45.4's own declarations (its other dialects: mysql, singlestore, sqlite, gel, and two in pg-core) fail
  // skipLibCheck: false by themselves, missing optional drivers' types and abstract members: Drizzle's to fix. pgonce's
  // declarations, pg's, ioredis's, kysely's and the app's code must have no error.
  const errors = await strictErrors('tsconfig.json', ['main.ts', 'common.cts', 'tour.ts', 'drizzle.ts'])
  expect(errors.filter((e) => !e.startsWith('node_modules/drizzle-orm/'))).toEqual([])
  // The ESM program: migrate, add twice with one jobId, a typed ValidationError, a worker runs the job once.
  const { stdout } = await run(process.execPath, [join(packed.app, 'out', 'main.js')], { cwd: packed.app, env })
  expect(JSON.parse(stdout)).toEqual({
    first: 'added',
    again: 'duplicate-job-id',
    same: true,
    bad: 'name',
    ran: ['ada@example.com'],
  })
}, 90_000)

it("runs under CommonJS with require('pgonce') where Node loads ES modules by require (20.19+), else says ERR_REQUIRE_ESM", async () => {
  // `out/common.cjs` is the compiled common.cts: `require("pgonce")`.
  const started = run(process.execPath, [join(packed.app, 'out', 'common.cjs')], { cwd: packed.app, env })
  // And 'pgonce/dashboard', whose module graph (hono, @hono/node-server) must load by require as well.
  const dashboard = run(process.execPath, ['-e', "console.log(typeof require('pgonce/dashboard').dashboard)"], {
    cwd: packed.app,
  })
  if (process.features.require_module === true) {
    expect(JSON.parse((await started).stdout)).toEqual({ outcome: 'added', state: 'waiting' })
    expect((await dashboard).stdout.trim()).toBe('function')
  } else {
    await expect(started).rejects.toThrow(/ERR_REQUIRE_ESM/)
    await expect(dashboard).rejects.toThrow(/ERR_REQUIRE_ESM/)
  }
}, 30_000)

it('resolves under `node --conditions=development` to the build it ships', async () => {
  const { stdout } = await run(
    process.execPath,
    ['--conditions=development', '--input-type=module', '-e', "console.log(import.meta.resolve('pgonce'))"],
    { cwd: packed.app },
  )
  expect(stdout.trim()).toBe(`file://${join(installed, 'dist', 'src', 'index.js')}`)
}, 30_000)

it('bundles with webpack 5 in development mode for Node, and the bundle adds a job', async () => {
  writeFileSync(join(packed.app, 'entry.mjs'), `import * as pgonce from 'pgonce'\n${addOne('bundled')}`)
  const stats = await new Promise<webpack.Stats>((resolve, reject) => {
    const compiler = webpack({
      mode: 'development',
      target: 'node',
      devtool: false,
      context: packed.app,
      entry: './entry.mjs',
      output: { path: join(packed.app, 'bundle'), filename: 'main.cjs' },
    })
    compiler.run((err, result) =>
      compiler.close(() => ((err ?? !result) ? reject(err ?? new Error('webpack gave no result')) : resolve(result))),
    )
  })
  const { errors, warnings } = stats.toJson({ all: false, errors: true, warnings: true })
  expect(errors?.map((e) => e.message)).toEqual([])
  // Left unresolved: optional modules of pg (pg-native) and of ioredis's debug (supports-color); nothing of pgonce's.
  expect(warnings?.map((w) => w.message).filter((m) => m.includes('node_modules/pgonce/'))).toEqual([])
  const { stdout } = await run(process.execPath, [join(packed.app, 'bundle', 'main.cjs')], { cwd: packed.app, env })
  expect(JSON.parse(stdout)).toEqual({ outcome: 'added', state: 'waiting' })
}, 60_000)

it('has the pgonce bin: stats --json reads the queues the app used', async () => {
  const { stdout } = await run(
    join(packed.app, 'node_modules', '.bin', 'pgonce'),
    ['stats', '--json', '--schema', db.schema, '--database-url', db.url],
    { cwd: packed.app },
  )
  const stats = JSON.parse(stdout) as { queues: { queue: string; counts: Record<string, number> }[] }
  expect(stats.queues.find((r) => r.queue === 'emails')).toMatchObject({
    queue: 'emails',
    counts: { completed: 1, waiting: 0, active: 0 },
  })
}, 30_000)

it("serves the dashboard from 'pgonce/dashboard': its types compile, its API answers on the app's queues", async () => {
  writeFileSync(
    join(packed.app, 'dash.mts'),
    `
import http from 'node:http'
import { dashboard, type DashboardAction, type DashboardHandler } from 'pgonce/dashboard'

const can = (action: DashboardAction) => action === 'retry'
const handler: DashboardHandler = dashboard({ connectionString: process.env.DATABASE_URL as string, schema: process.env.SCHEMA, can })
const server = http.createServer(handler).listen(0, '127.0.0.1')
await new Promise((resolve) => server.once('listening', resolve))
const origin = 'http://127.0.0.1:' + (server.address() as { port: number }).port
const queues = (await (await fetch(origin + '/api/queues')).json()) as { queues: { name: string }[] }
const config = (await (await fetch(origin + '/api/config')).json()) as { actions: Record<string, boolean> }
server.close()
await handler.close()
console.log(JSON.stringify({ queues: queues.queues.map((q) => q.name), retry: config.actions.retry, pause: config.actions.pause }))
`,
  )
  await compileStrict('tsconfig.dash.json', ['dash.mts'])
  const { stdout } = await run(process.execPath, [join(packed.app, 'out', 'dash.mjs')], { cwd: packed.app, env })
  expect(JSON.parse(stdout)).toEqual({ queues: expect.arrayContaining(['emails']), retry: true, pause: false })
}, 60_000)

describe.each(runtimes)(
  'on $name (test/compat installs it from the npm registry)',
  ({ name, bin, version, missing }) => {
    const skip = missing !== null && process.env.REQUIRE_COMPAT !== '1'
    it.skipIf(skip)(
      `runs the ESM program (migrate, add twice with one jobId, a worker) and require('pgonce')${skip ? ` (skipped: ${missing})` : ''}`,
      async () => {
        expect((await run(bin, ['--version'], { cwd: packed.app })).stdout.trim()).toMatch(version)
        const queue = `on-${name.replace(/\W/g, '').toLowerCase()}`
        const program = await run(bin, [join(packed.app, 'out', 'main.js')], {
          cwd: packed.app,
          env: { ...env, QUEUE: queue },
        })
        expect(JSON.parse(program.stdout)).toEqual({
          first: 'added',
          again: 'duplicate-job-id',
          same: true,
          bad: 'name',
          ran: ['ada@example.com'],
        })
        const common = await run(bin, [join(packed.app, 'out', 'common.cjs')], { cwd: packed.app, env })
        expect(JSON.parse(common.stdout)).toEqual({ outcome: 'added', state: 'waiting' })
      },
      60_000,
    )
  },
)
