// The read commands of the built CLI, as JSON (the shapes docs/cli.md documents) and as text: stats (all queues, one,
// --watch until SIGINT), jobs list (states, pages) and show, dedup get, failed list, schedulers list.

import { describe, expect, it } from 'vitest'
import { cliSuite, runCli } from './helpers/cli-support.js'
import { seedEmails } from './helpers/cli-seed.js'

const suite = cliSuite('cli_read', seedEmails)

const cli = suite.run

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the CLI's JSON, whose fields each test reads as it expects them
async function json(...args: string[]): Promise<any> {
  const { code, stdout, stderr } = await cli(...args, '--json')
  expect({ code, stderr }).toEqual({ code: 0, stderr: '' })
  expect(stdout.endsWith('\n') && !stdout.slice(0, -1).includes('\n')).toBe(true)
  return JSON.parse(stdout)
}

const ISO = expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
const zero = { waiting: 0, delayed: 0, 'waiting-children': 0, active: 0, completed: 0, failed: 0, cancelled: 0 }
const JOB_KEYS = [
  'id',
  'queue',
  'name',
  'jobId',
  'state',
  'data',
  'priority',
  'attempts',
  'maxAttempts',
  'backoff',
  'deduplicationId',
  'runAt',
  'createdAt',
  'startedAt',
  'finishedAt',
  'cancelRequestedAt',
  'progress',
  'result',
  'failedReason',
  'stacktrace',
]

describe.concurrent('read commands', () => {
  it('stats: every queue with jobs, counts per state, held keys and paused; one queue even when it has none', async () => {
    expect(await json('stats')).toEqual({
      queues: [
        {
          queue: 'emails',
          paused: false,
          counts: { ...zero, waiting: 2, delayed: 1, failed: 1 },
          heldKeys: 1,
          limits: null,
        },
        { queue: 'reports', paused: false, counts: { ...zero, completed: 1 }, heldKeys: 0, limits: null },
      ],
    })
    expect(await json('stats', '--queue', 'empty')).toEqual({
      queues: [{ queue: 'empty', paused: false, counts: zero, heldKeys: 0, limits: null }],
    })
    const text = await cli('stats', '--queue', 'emails')
    expect(text.code).toBe(0)
    expect(text.stdout.split('\n')[1]).toMatch(/^emails\s+no\s+2\s+1\s+0\s+0\s+0\s+1\s+0\s+1$/)
  })

  it('stats --watch redraws every --interval until SIGINT, and exits 0; with --json one line per redraw', async () => {
    const draws = (out: string) => out.split('\n').filter((l) => l.includes('every 0.1 s, Ctrl-C to stop')).length
    const text = await runCli(
      suite.main,
      ['stats', '--watch', '--interval', '100', '--schema', suite.db.schema],
      { DATABASE_URL: suite.db.url },
      (out) => draws(out) >= 2 && out.endsWith('\n\n'),
    )
    expect(text.code).toBe(0)
    expect(draws(text.stdout)).toBeGreaterThanOrEqual(2)
    expect(text.stdout.match(/^emails +no/gm)?.length).toBeGreaterThanOrEqual(2)

    const lines = await runCli(
      suite.main,
      ['stats', '--watch', '--interval', '100', '--json', '--queue', 'reports', '--schema', suite.db.schema],
      { DATABASE_URL: suite.db.url },
      (out) => out.split('\n').length > 2,
    )
    expect(lines.code).toBe(0)
    const parsed = lines.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l))
    expect(parsed.length).toBeGreaterThanOrEqual(2)
    for (const p of parsed) expect(p.queues[0]).toMatchObject({ queue: 'reports', counts: { completed: 1 } })
  })

  it('jobs list: newest first, every field of Job; --state and --limit with next as the --after of the next page', async () => {
    const all = await json('jobs', 'list', '--queue', 'emails')
    expect(all.jobs.map((j: { id: string }) => j.id)).toEqual(['4', '3', '2', '1'])
    expect(all.next).toBeNull()
    expect(Object.keys(all.jobs[0])).toEqual(JOB_KEYS)
    expect(all.jobs[3]).toMatchObject({
      id: '1',
      queue: 'emails',
      name: 'send',
      jobId: 'welcome-ann',
      state: 'waiting',
      data: { to: 'ann@example.com' },
      attempts: 0,
      maxAttempts: 1,
      createdAt: ISO,
      runAt: ISO,
      finishedAt: null,
    })

    const first = await json('jobs', 'list', '--queue', 'emails', '--state', 'waiting', '--limit', '1')
    expect([first.jobs.map((j: { id: string }) => j.id), first.next]).toEqual([['2'], '2'])
    const second = await json('jobs', 'list', '--queue', 'emails', '--state', 'waiting', '--limit', '1', '--after', '2')
    expect([second.jobs.map((j: { id: string }) => j.id), second.next]).toEqual([['1'], '1'])
    const both = await json('jobs', 'list', '--queue', 'emails', '--state', 'failed,delayed')
    expect(both.jobs.map((j: { state: string }) => j.state)).toEqual(['delayed', 'failed'])
    const none = await cli('jobs', 'list', '--queue', 'emails', '--state', 'active')
    expect(none).toEqual({ code: 0, stdout: 'no jobs\n', stderr: '' })
  })

  it("jobs show: one job with its failure; dedup get: the key's holder", async () => {
    const job = await json('jobs', 'show', '3', '--queue', 'emails')
    expect(Object.keys(job)).toEqual(JOB_KEYS)
    expect(job).toMatchObject({
      id: '3',
      state: 'failed',
      attempts: 3,
      maxAttempts: 3,
      jobId: 'welcome-cy',
      failedReason: 'SMTP 550: mailbox unavailable',
      stacktrace: expect.stringContaining('mailer.ts:42:11'),
      finishedAt: ISO,
    })
    // A job of another queue is not found through this one.
    expect((await cli('jobs', 'show', '5', '--queue', 'emails')).code).toBe(1)
    expect((await json('jobs', 'show', '5', '--queue', 'reports')).result).toEqual({ rows: 120 })

    expect(await json('dedup', 'get', 'digest-bob', '--queue', 'emails')).toEqual({
      queue: 'emails',
      key: 'digest-bob',
      ownerId: '2',
    })
    expect(await cli('dedup', 'get', 'nobody', '--queue', 'emails')).toEqual({
      code: 1,
      stdout: '',
      stderr: "error: key 'nobody' is not held in queue emails\n",
    })
  })

  it('failed list: every queue or one, from the failed_jobs view', async () => {
    expect(await json('failed', 'list')).toEqual({
      jobs: [
        {
          id: '3',
          queue: 'emails',
          name: 'send',
          jobId: 'welcome-cy',
          attempts: 3,
          maxAttempts: 3,
          failedReason: 'SMTP 550: mailbox unavailable',
          finishedAt: ISO,
          data: { to: 'cy@example.com' },
        },
      ],
    })
    expect(await json('failed', 'list', '--queue', 'reports', '--limit', '5')).toEqual({ jobs: [] })
    expect(await cli('failed', 'list', '--queue', 'reports')).toEqual({
      code: 0,
      stdout: 'no failed jobs\n',
      stderr: '',
    })
  })

  it("schedulers list: the queue's schedulers with their next tick", async () => {
    expect(await json('schedulers', 'list', '--queue', 'emails')).toEqual({
      schedulers: [
        {
          id: 'daily-digest',
          queue: 'emails',
          every: null,
          pattern: '0 8 * * *',
          tz: 'Europe/Paris',
          template: { name: 'digest', data: {}, opts: {} },
          nextRunAt: ISO,
          lastRunAt: null,
        },
      ],
    })
    expect(await cli('schedulers', 'list', '--queue', 'reports')).toEqual({
      code: 0,
      stdout: 'no schedulers in queue reports\n',
      stderr: '',
    })
  })
})
