// The README's five-minute tour, run as written: its TypeScript blocks, in order, make one script (with the names
// they take for granted defined first: the comment's fields, a Kysely instance, the tables), run against a database
// of its own (the tour uses the default schema); its SQL block is run too. What they say happens is checked from the
// database: the comment and its job committed together, the dedup key answering a repeat, the effect recorded once.

import { execFile } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import pg from 'pg'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { databaseUrl } from './helpers/schema.js'

const exec = promisify(execFile)
const ROOT = join(import.meta.dirname, '..')
const readme = readFileSync(join(ROOT, 'README.md'), 'utf8')
const tour = readme.slice(readme.indexOf('## A five-minute tour'), readme.indexOf('## Guarantees'))
const blocks = (lang: string): string[] =>
  [...tour.matchAll(new RegExp('```' + lang + '\\n([\\s\\S]*?)```', 'g'))].map((m) => m[1] as string)

const database = `pgonce_readme_${randomBytes(4).toString('hex')}`
let url: string
let admin: pg.Pool
let work: string

beforeAll(async () => {
  admin = new pg.Pool({ connectionString: databaseUrl(), max: 1 })
  await admin.query(`create database ${database}`)
  const u = new URL(databaseUrl())
  u.pathname = `/${database}`
  url = u.toString()
  const app = new pg.Client({ connectionString: url })
  await app.connect()
  await app.query(`create table comments (id serial primary key, post_id int not null, author_id int not null, body text not null);
                   create table outbox (user_id int not null, comment_id int not null)`)
  await app.end()
  // A scratch directory whose node_modules holds pg and kysely, and whose tsconfig.json maps `pgonce` to this checkout's
  // src/ (tsx follows `paths`, as the repository's own scripts do).
  work = mkdtempSync(join(tmpdir(), 'pgonce-readme-'))
  mkdirSync(join(work, 'node_modules'))
  for (const dep of ['pg', 'kysely']) symlinkSync(join(ROOT, 'node_modules', dep), join(work, 'node_modules', dep))
  writeFileSync(join(work, 'package.json'), JSON.stringify({ type: 'module', private: true }))
  writeFileSync(
    join(work, 'tsconfig.json'),
    JSON.stringify({ compilerOptions: { paths: { pgonce: [join(ROOT, 'src', 'index.ts')] } } }),
  )
})
afterAll(async () => {
  if (work !== undefined) rmSync(work, { recursive: true, force: true })
  await admin?.query(`drop database if exists ${database} with (force)`)
  await admin?.end()
})

it('has the blocks this test runs: four TypeScript, one SQL', () => {
  expect(blocks('ts').length).toBe(4)
  expect(blocks('sql').length).toBe(1)
})

it('runs the tour as written: a comment and its job commit together, a repeat is absorbed by the key, the effect happens once', async () => {
  const [withPg, withKysely, dedup, worker] = blocks('ts') as [string, string, string, string]
  const script = `
import { Kysely, PostgresDialect, CamelCasePlugin } from 'kysely'
const postId = 1, authorId = 2, body = 'Nice post', postOwnerId = 7
const userId = postOwnerId
let commentId = 0
${withPg}
const db = new Kysely<any>({ dialect: new PostgresDialect({ pool }), plugins: [new CamelCasePlugin()] })
${withKysely}
commentId = (await pool.query('select max(id)::int as id from comments')).rows[0].id
${dedup}
const first = job
const again = await notifications.add('push', { userId, commentId }, {
  deduplication: { id: \`notify:push:\${userId}:\${commentId}\`, ttl: 24 * 60 * 60 * 1000 },
})
${worker}
const deadline = Date.now() + 20_000
for (;;) {
  const { rows } = await pool.query("select count(*)::int as n from pgonce.jobs where state = 'completed'")
  if (rows[0].n === 3 || Date.now() > deadline) break
  await new Promise((resolve) => setTimeout(resolve, 50))
}
await worker.close()
await notifications.close()
await pool.end()
console.log(JSON.stringify({ first: [first.outcome, first.deduplicated], again: [again.outcome, again.deduplicated, again.id === first.id] }))
`
  writeFileSync(join(work, 'tour.ts'), script)
  const { stdout } = await exec(join(ROOT, 'node_modules', '.bin', 'tsx'), ['tour.ts'], {
    cwd: work,
    env: { ...process.env, DATABASE_URL: url },
  }).catch((err: Error & { stdout?: string; stderr?: string }) => {
    throw new Error(`the tour failed:\n${err.stdout ?? ''}${err.stderr ?? ''}`)
  })
  expect(JSON.parse(stdout.trim().split('\n').at(-1) as string)).toEqual({
    first: ['added', false],
    again: ['duplicate-key', true, true],
  })
  const check = new pg.Client({ connectionString: url })
  await check.connect()
  try {
    // Two comments (pg, then Kysely), each with its push job; the dedup block's job; one outbox row per job's effect.
    const { rows: comments } = await check.query('select id from comments order by id')
    expect(comments.length).toBe(2)
    const { rows: jobs } = await check.query(`select state, data from pgonce.jobs order by id`)
    expect(jobs.map((j) => j.state)).toEqual(['completed', 'completed', 'completed'])
    expect(jobs.map((j) => j.data.commentId)).toEqual([comments[0].id, comments[1].id, comments[1].id])
    const { rows: outbox } = await check.query('select user_id, comment_id from outbox order by comment_id')
    // The dedup block's job and the Kysely block's job name the same (user, comment): ctx.effect's key makes it one push.
    expect(outbox).toEqual([
      { user_id: 7, comment_id: comments[0].id },
      { user_id: 7, comment_id: comments[1].id },
    ])

    const [sql] = blocks('sql') as [string]
    const {
      rows: [answer],
    } = await check.query(sql)
    expect(answer.outcome).toBe('added')
    const {
      rows: [repeat],
    } = await check.query(sql)
    expect(repeat).toEqual({ id: answer.id, outcome: 'duplicate-key' })
  } finally {
    await check.end()
  }
}, 60_000)
