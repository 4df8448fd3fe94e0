// `pgonce dashboard` as a child process of the built CLI: it checks the schema, serves the API on 127.0.0.1 (read-only
// unless --allow-actions), prints its URL and never the database's password, and stops cleanly on SIGINT.

import { spawn } from 'node:child_process'
import { afterAll, expect, it } from 'vitest'
import { Queue } from '../src/index.js'
import { cliSuite } from './helpers/cli-support.js'
import { call, post } from './helpers/dashboard.js'
import { waitFor } from './helpers/wait.js'

const suite = cliSuite('dash_cli')
const queues: Queue[] = []
afterAll(async () => {
  await Promise.all(queues.map((q) => q.close()))
})

/** Starts `pgonce dashboard args`; resolves once it printed its URL. */
async function start(...args: string[]) {
  const { DATABASE_URL: _, ...env } = process.env
  const child = spawn(
    process.execPath,
    [suite.main, 'dashboard', '--port', '0', '--schema', suite.db.schema, ...args],
    {
      env: { ...env, DATABASE_URL: suite.db.url },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  )
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()))
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()))
  const closed = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)))
  const url = await waitFor(
    () =>
      /http:\/\/\S+\//.exec(stdout)?.[0] ?? (child.exitCode !== null ? Promise.reject(new Error(stderr)) : undefined),
    20_000,
    'the dashboard to print its URL',
  )
  return {
    url,
    output: () => stdout + stderr,
    async stop() {
      child.kill('SIGINT')
      return { code: await closed, stdout, stderr }
    },
  }
}

it('serves the API read-only on 127.0.0.1, prints its own URL only, and stops on SIGINT with exit 0', async () => {
  const q = new Queue('cli-q', { connectionString: suite.db.url, schema: suite.db.schema })
  queues.push(q)
  await q.add('x', {})
  const d = await start('--base-path', '/ops/queues')
  expect(d.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/ops\/queues\/$/)
  const { body } = await call(`${d.url}api/queues`)
  expect(body.queues.map((x: { name: string }) => x.name)).toEqual(['cli-q'])
  expect((await post(`${d.url}api/queues/cli-q/pause`)).body.error.code).toBe('READ_ONLY')
  const password = new URL(suite.db.url).password
  const stopped = await d.stop()
  expect(stopped.code).toBe(0)
  expect(stopped.stdout).toContain('read-only')
  expect(stopped.stdout).toContain('pgonce dashboard: stopped')
  if (password !== '') expect(stopped.stdout + stopped.stderr).not.toContain(password)
})

it('--allow-actions lets actions through', async () => {
  const q = new Queue('cli-act', { connectionString: suite.db.url, schema: suite.db.schema })
  queues.push(q)
  await q.add('x', {})
  const d = await start('--allow-actions')
  try {
    expect((await post(`${d.url}api/queues/cli-act/pause`)).body).toEqual({ ok: true })
    expect(await q.isPaused()).toBe(true)
  } finally {
    expect((await d.stop()).code).toBe(0)
  }
})

it('refuses conflicting flags (exit 2) and a schema that is not migrated (exit 1), before listening', async () => {
  const both = await suite.run('dashboard', '--read-only', '--allow-actions', '--port', '0')
  expect(both.code).toBe(2)
  const bad = await suite.run('dashboard', '--base-path', 'no-slash', '--port', '0')
  expect(bad).toMatchObject({ code: 2, stdout: '' })
  const missing = await suite.runIn('t_no_such_schema', 'dashboard', '--port', '0')
  expect(missing).toMatchObject({ code: 1, stdout: '' })
  expect(missing.stderr).toContain('schema t_no_such_schema does not exist')
})
