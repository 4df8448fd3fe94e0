// `npm run demo`, small and quiet, in a child process as a user runs it: the story ends with its tables and `exactly once: yes`, and leaves no schema behind.

import { spawn } from 'node:child_process'
import { dirname, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import pg from 'pg'
import { expect, inject, it } from 'vitest'

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..')

/** Runs examples/demo.ts the way the `demo` script does; kills it after `timeoutMs`. */
function runDemo(
  env: Record<string, string>,
  timeoutMs: number,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'examples/demo.ts'], {
      cwd: repoRoot,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
    const timer = setTimeout(() => {
      // SIGTERM first: the demo then stops its workers and drops its schema.
      child.kill('SIGTERM')
      setTimeout(() => child.kill('SIGKILL'), 10_000).unref()
      reject(new Error(`the demo did not finish within ${timeoutMs} ms\n${stdout}\n${stderr}`))
    }, timeoutMs)
    child.once('error', reject)
    child.once('exit', (code) => {
      clearTimeout(timer)
      resolvePromise({ code, stdout, stderr })
    })
  })
}

it('fires duplicated comment events, survives a worker killed mid-send, and sends every push exactly once', async () => {
  const url = inject('databaseUrl')
  const { code, stdout, stderr } = await runDemo(
    {
      DATABASE_URL: url,
      PGONCE_TEST_POSTGRES: 'env',
      DEMO_EVENTS: '300',
      DEMO_USERS: '40',
      DEMO_QUIET: '1',
    },
    30_000,
  )

  expect(code, `${stdout}\n${stderr}`).toBe(0)
  expect(stdout).toMatch(/^exactly once: yes$/m)
  expect(stdout).toMatch(/^kill: SIGKILL to worker \d+ inside the send of job \d+/m)
  expect(stdout).toMatch(
    /^the killed send: job \d+ is completed after \d+ attempts, rescued after its lease; its push was sent 1 time$/m,
  )
  // The table, on stdout: 300 events, 180 of them posts, so 180 pushes.
  expect(stdout).toMatch(/│ events fired +│ +300 │/)
  expect(stdout).toMatch(/│ notifications sent +│ +180 │/)
  for (const row of [
    'duplicates absorbed by jobId',
    'duplicates absorbed by dedup key',
    'duplicates absorbed by the effect ledger',
    'jobs rescued after the kill',
  ]) {
    expect(stdout).toContain(row)
  }
  // The breakdown says what its columns count.
  expect(stdout).toMatch(
    /^by effect ledger: of the new jobs, those whose run found its push already recorded by ctx\.effect/m,
  )
  // Quiet: no progress bar anywhere.
  expect(stdout + stderr).not.toContain('events fired █')

  const schema = /^schema (pgonce_demo_[0-9a-f]+)/m.exec(stdout)?.[1]
  expect(schema).toBeDefined()
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    const { rows } = await client.query('select 1 from pg_namespace where nspname = $1', [schema])
    expect(rows).toHaveLength(0)
  } finally {
    await client.end()
  }
}, 40_000)
