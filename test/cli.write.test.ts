// The commands of the built CLI that change something, checked in the database: jobs retry/cancel/remove, failed retry
// (a report per job, the older generation of a jobId refused), dedup remove, pause/resume, migrate, and `pgonce sql`
// applied with psql to an empty database leaving what migrate() builds.

import { spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { afterAll, describe, expect, it } from 'vitest'
import { createDatabase } from '../dev/postgres-server.js'
import { Queue, migrate } from '../src/index.js'
import { committedMigrations } from '../src/migrate/migrations.js'
import { cliSuite, runCli } from './helpers/cli-support.js'
import { freshSchema } from './helpers/schema.js'
import { catalogOf } from './helpers/catalog.js'

const suite = cliSuite('cli_write')
const queues: Queue[] = []
afterAll(async () => {
  await Promise.all(queues.map((q) => q.close()))
})

const cli = suite.run

function queueOf(name: string): Queue {
  const q = new Queue(name, { connectionString: suite.db.url, schema: suite.db.schema, migrate: false })
  queues.push(q)
  return q
}

async function setState(id: string, state: 'failed' | 'active' | 'completed'): Promise<void> {
  await suite.db.pool.query(
    `update "${suite.db.schema}".jobs set state = $2, finished_at = case when $2 = 'active' then null else now() end,
    started_at = now(), lock_token = case when $2 = 'active' then gen_random_uuid() end,
    locked_until = case when $2 = 'active' then now() + interval '1 minute' end where id = $1`,
    [id, state],
  )
}

describe.concurrent('write commands', () => {
  it('jobs retry: a failed job runs again; a second retry is refused with its code (exit 1, nothing on stdout)', async () => {
    const q = queueOf('retry')
    const job = await q.add('x', {})
    await setState(job.id, 'failed')
    const ok = await cli('jobs', 'retry', job.id, '--queue', 'retry', '--json')
    expect(ok).toEqual({
      code: 0,
      stdout: `${JSON.stringify({ id: job.id, retried: true, code: null, message: null })}\n`,
      stderr: '',
    })
    expect((await q.getJob(job.id))?.state).toBe('waiting')
    expect(await cli('jobs', 'retry', job.id, '--queue', 'retry')).toEqual({
      code: 1,
      stdout: '',
      stderr: `error: cannot retry job ${job.id}: only a failed job can be retried (NOT_FAILED)\n`,
    })
  })

  it('failed retry: every failed job of the queue, newest first; the older failed generation of a jobId is refused', async () => {
    const q = queueOf('bulk-retry')
    const old = await q.add('x', {}, { jobId: 'gen' })
    await setState(old.id, 'failed')
    const newer = await q.add('x', {}, { jobId: 'gen' })
    await setState(newer.id, 'failed')
    const other = await q.add('y', {})
    await setState(other.id, 'failed')
    const { code, stdout, stderr } = await cli('failed', 'retry', '--queue', 'bulk-retry', '--json')
    expect(JSON.parse(stdout)).toEqual({
      queue: 'bulk-retry',
      retried: 2,
      notRetried: 1,
      results: [
        { id: other.id, retried: true, code: null, message: null },
        { id: newer.id, retried: true, code: null, message: null },
        {
          id: old.id,
          retried: false,
          code: 'JOB_ID_LIVE',
          message: expect.stringContaining('a newer live generation'),
        },
      ],
    })
    expect([code, stderr]).toEqual([1, 'error: 1 of 3 jobs not retried\n'])
    expect((await q.getJob(old.id))?.state).toBe('failed')

    await setState(other.id, 'failed')
    expect(await cli('failed', 'retry', '--queue', 'bulk-retry', other.id)).toEqual({
      code: 0,
      stdout: `job ${other.id}: retried\nretried 1 of 1\n`,
      stderr: '',
    })
    expect(await cli('failed', 'retry', '--queue', 'nothing-failed')).toEqual({
      code: 0,
      stdout: 'no failed jobs in queue nothing-failed\n',
      stderr: '',
    })
  })

  it('jobs cancel: pending, running, finished and missing jobs each say what happened', async () => {
    const q = queueOf('cancel')
    const [pending, running, done] = [await q.add('x', {}), await q.add('x', {}), await q.add('x', {})]
    await setState(running.id, 'active')
    await setState(done.id, 'completed')
    const cancel = async (id: string) =>
      JSON.parse((await cli('jobs', 'cancel', id, '--queue', 'cancel', '--json')).stdout)
    expect(await cancel(pending.id)).toEqual({ id: pending.id, outcome: 'cancelled' })
    expect(await cancel(running.id)).toEqual({ id: running.id, outcome: 'cancel-requested' })
    expect((await cli('jobs', 'cancel', done.id, '--queue', 'cancel')).stdout).toBe(
      `job ${done.id}: already finished, nothing changed\n`,
    )
    expect(await cli('jobs', 'cancel', '999999', '--queue', 'cancel')).toEqual({
      code: 1,
      stdout: '',
      stderr: 'error: job 999999 not found in queue cancel\n',
    })
    expect((await q.getJob(pending.id))?.state).toBe('cancelled')
    expect((await q.getJob(running.id))?.cancelRequestedAt).not.toBeNull()
  })

  it('jobs remove: refused for a running job, else deleted; a second remove finds nothing', async () => {
    const q = queueOf('remove')
    const [job, running] = [await q.add('x', {}), await q.add('x', {})]
    await setState(running.id, 'active')
    const refused = await cli('jobs', 'remove', running.id, '--queue', 'remove')
    expect([refused.code, refused.stderr]).toEqual([
      1,
      `error: cannot remove job ${running.id}: its handler is running (cancelJob asks it to stop) (ACTIVE)\n`,
    ])
    expect(await cli('jobs', 'remove', job.id, '--queue', 'remove', '--json')).toEqual({
      code: 0,
      stdout: `{"id":"${job.id}","removed":true}\n`,
      stderr: '',
    })
    expect(await q.getJob(job.id)).toBeNull()
    expect((await cli('jobs', 'remove', job.id, '--queue', 'remove')).code).toBe(1)
  })

  it('dedup remove: the held key goes and the next add proceeds; a key not held is exit 1', async () => {
    const q = queueOf('dedup')
    await q.add('x', {}, { deduplication: { id: 'k' } })
    expect(await cli('dedup', 'remove', 'k', '--queue', 'dedup', '--json')).toEqual({
      code: 0,
      stdout: '{"queue":"dedup","key":"k","removed":true}\n',
      stderr: '',
    })
    expect((await q.add('x', {}, { deduplication: { id: 'k' } })).outcome).toBe('added')
    expect(await cli('dedup', 'remove', 'absent', '--queue', 'dedup')).toEqual({
      code: 1,
      stdout: '',
      stderr: "error: key 'absent' is not held in queue dedup: nothing removed\n",
    })
  })

  it('pause and resume: the setting every worker reads; a queue never seen is refused with the known ones, unless --create', async () => {
    const db = await freshSchema('cli_pause')
    const on = { pool: db.pool, schema: db.schema, migrate: false }
    const emails = new Queue('emails', on)
    const run = (...args: string[]) => suite.runIn(db.schema, ...args)
    try {
      await emails.add('send', {})
      await new Queue('reports', on).upsertJobScheduler('daily', { every: 86_400_000 }, { name: 'report' })
      // A queue is known by a job in any state (each kind of state is read from its own index), a setting or a scheduler
      // (reports).
      for (const state of ['delayed', 'active', 'waiting-children', 'failed']) {
        const job = await new Queue(`in-${state}`, on).add('x', {})
        await db.pool.query(
          `update "${db.schema}".jobs set state = $2, lock_token = case when $2 = 'active' then gen_random_uuid() end,
          locked_until = case when $2 = 'active' then now() + interval '1 minute' end,
          finished_at = case when $2 = 'failed' then now() end where id = $1`,
          [job.id, state],
        )
      }
      const known = 'emails, in-active, in-delayed, in-failed, in-waiting-children, reports'
      const refused = (verb: string) => ({
        code: 1,
        stdout: '',
        stderr:
          `error: queue emials was never seen in schema ${db.schema} ` +
          `(no job, setting or scheduler); known queues: ${known}; give --create to ${verb} it anyway\n`,
      })
      expect(await run('pause', 'emials')).toEqual(refused('pause'))
      expect(await run('resume', 'emials', '--json')).toEqual(refused('resume'))
      expect((await db.pool.query(`select 1 from "${db.schema}".queue_settings where queue = 'emials'`)).rowCount).toBe(
        0,
      )

      expect(await run('pause', 'emails', '--json')).toEqual({
        code: 0,
        stdout: '{"queue":"emails","paused":true}\n',
        stderr: '',
      })
      expect(await emails.isPaused()).toBe(true)
      expect(await run('resume', 'emails')).toEqual({ code: 0, stdout: 'queue emails: resumed\n', stderr: '' })
      expect(await emails.isPaused()).toBe(false)
      for (const queue of ['reports', 'in-waiting-children']) expect((await run('pause', queue)).code, queue).toBe(0)
      // A queue paused before anything of it exists, e.g. before its first deploy; its settings row makes it known.
      expect(await run('pause', 'later', '--create')).toEqual({ code: 0, stdout: 'queue later: paused\n', stderr: '' })
      expect(await run('resume', 'later')).toEqual({ code: 0, stdout: 'queue later: resumed\n', stderr: '' })
    } finally {
      await db.drop()
    }
  })

  it('migrate: creates a new schema, then finds it up to date', async () => {
    const schema = `t_cli_migrate_${randomBytes(4).toString('hex')}`
    try {
      const first = await suite.runIn(schema, 'migrate', '--json')
      expect(JSON.parse(first.stdout)).toEqual({ schema, applied: committedMigrations().map((m) => m.filename) })
      expect(await suite.runIn(schema, 'migrate')).toEqual({
        code: 0,
        stdout: `schema ${schema} is up to date\n`,
        stderr: '',
      })
    } finally {
      await suite.db.pool.query(`drop schema if exists "${schema}" cascade`)
    }
  })
})

/** psql on PATH; without it the SQL is sent as one simple-protocol query in a transaction, as psql -1 would. */
const psql = spawnSync('psql', ['--version']).status === 0

describe('pgonce sql', () => {
  it(`applied ${psql ? 'with psql' : 'as one query (no psql here)'} to an empty database, leaves what migrate() builds, up to date`, async () => {
    const name = `pgonce_cli_sql_${randomBytes(4).toString('hex')}`
    const url = await createDatabase(suite.db.url, name)
    const schema = 'app_jobs'
    try {
      const sql = await runCli(suite.main, ['sql', '--schema', schema])
      expect([sql.code, sql.stderr]).toEqual([0, ''])
      if (psql) {
        // As docs/cli.md applies it: from a file (here stdin). Not as one argument: Linux caps an argument at 128 KiB.
        const applied = spawnSync(
          'psql',
          ['-X', '-q', '-v', 'ON_ERROR_STOP=1', '--single-transaction', '-f', '-', url],
          { input: sql.stdout, encoding: 'utf8', env: { ...process.env, PGOPTIONS: '-c client_min_messages=warning' } },
        )
        expect([applied.status, applied.stderr]).toEqual([0, ''])
      } else {
        const client = new pg.Client({ connectionString: url })
        await client.connect()
        await client.query(`begin;\n${sql.stdout}\ncommit;`).finally(() => client.end())
      }
      expect(await migrate({ connectionString: url, schema })).toEqual({ applied: [] })
      const pool = new pg.Pool({ connectionString: url, max: 1 })
      // pool.end() resolves before its client's socket has closed: the forced drop below can still terminate that
      // backend, and a pool with no 'error' listener then throws (an uncaught 57P01 once in CI).
      pool.on('error', () => {})
      const reference = `t_cli_sql_${randomBytes(4).toString('hex')}`
      try {
        await migrate({ pool: suite.db.pool, schema: reference })
        expect(await catalogOf(pool, schema)).toEqual(await catalogOf(suite.db.pool, reference))
      } finally {
        await pool.end()
        await suite.db.pool.query(`drop schema if exists "${reference}" cascade`)
      }
    } finally {
      const admin = new pg.Client({ connectionString: suite.db.url })
      await admin.connect()
      await admin.query(`drop database if exists "${name}" with (force)`).finally(() => admin.end())
    }
  })

  it('--since prints only the later migrations; an unknown one is a usage error', async () => {
    const all = committedMigrations()
    const first = all[0]?.filename as string
    const since = await runCli(suite.main, ['sql', '--since', first.slice(0, 6)])
    expect(since.stdout).toContain(`after ${first}.`)
    expect(since.stdout.match(/^-- \d{6}.*\.sql$/gm) ?? []).toEqual(all.slice(1).map((m) => `-- ${m.filename}`))
    const bad = await runCli(suite.main, ['sql', '--since', '999999'])
    expect([bad.code, bad.stdout]).toEqual([2, ''])
    expect(bad.stderr).toBe(
      `error: --since: no committed migration 999999 (known: ${all.map((m) => m.filename).join(', ')})\n`,
    )
  })
})
