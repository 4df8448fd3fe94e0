// The dashboard's actions against a real schema: each one does what the Queue method does (and answers its typed
// refusal as 409), many selected jobs at once, and every refusal (read-only, can() saying no, a cross-site browser
// request) is a 403 that changes nothing.

import type { IncomingMessage } from 'node:http'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type DashboardAction, type DashboardRequest, dashboard } from '../src/dashboard/index.js'
import { type Served, call, post, serveDashboard, queuesOn, setState } from './helpers/dashboard.js'
import { storedJob } from './helpers/jobs.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'

let db: TestSchema
/** Actions allowed (readOnly: false). */
let open: Served
/** The default: read-only. */
let readOnly: Served
/** can(): only requests with `x-role: admin`, and never 'remove'. */
let guarded: Served
const asked: { action: DashboardAction; role: unknown }[] = []
const queues = queuesOn(() => db)
const queueOf = queues.queueOf

beforeAll(async () => {
  db = await freshSchema('dash_actions')
  const base = { connectionString: db.url, schema: db.schema }
  open = await serveDashboard(dashboard({ ...base, readOnly: false }))
  readOnly = await serveDashboard(dashboard(base))
  const can = (action: DashboardAction, req: DashboardRequest) => {
    const role = (req as IncomingMessage).headers['x-role']
    asked.push({ action, role })
    return Promise.resolve(role === 'admin' && action !== 'remove')
  }
  guarded = await serveDashboard(dashboard({ ...base, can }))
})

afterAll(async () => {
  await Promise.all([open, readOnly, guarded].map((s) => s.close()))
  await queues.close()
  await db.drop()
})

describe('job actions', () => {
  it('retry gives a failed job a fresh run; retrying it again is 409 with the typed reason', async () => {
    const q = queueOf('retried')
    const job = await q.add('x', {})
    await setState(db, job.id, 'failed', { error: 'boom' })
    const ok = await post(`${open.origin}/api/jobs/${job.id}/retry`)
    expect(ok).toMatchObject({ status: 200, body: { ok: true, job: { id: job.id, state: 'waiting', attempts: 0 } } })
    const again = await post(`${open.origin}/api/jobs/${job.id}/retry`)
    expect(again).toMatchObject({ status: 409, body: { error: { code: 'CONFLICT', reason: 'NOT_FAILED' } } })
  })

  it('cancel, promote and remove do what the Queue methods do; a missing job is 404', async () => {
    const q = queueOf('controlled')
    const delayed = await q.add('d', {}, { delay: 600_000 })
    expect((await post(`${open.origin}/api/jobs/${delayed.id}/promote`)).body.job.state).toBe('waiting')
    expect((await post(`${open.origin}/api/jobs/${delayed.id}/promote`)).body.error.reason).toBe('NOT_DELAYED')
    expect((await post(`${open.origin}/api/jobs/${delayed.id}/cancel`)).body.job.state).toBe('cancelled')
    expect((await post(`${open.origin}/api/jobs/${delayed.id}/cancel`)).body.error).toMatchObject({
      code: 'CONFLICT',
      reason: 'ALREADY_FINISHED',
    })
    expect(await post(`${open.origin}/api/jobs/${delayed.id}/remove`)).toMatchObject({
      status: 200,
      body: { ok: true, job: null },
    })
    expect(await q.getJob(delayed.id)).toBeNull()
    expect((await post(`${open.origin}/api/jobs/${delayed.id}/remove`)).status).toBe(404)
    const running = await q.add('r', {})
    await setState(db, running.id, 'active')
    expect((await post(`${open.origin}/api/jobs/${running.id}/remove`)).body.error).toMatchObject({
      code: 'CONFLICT',
      reason: 'ACTIVE',
    })
    expect((await post(`${open.origin}/api/jobs/${running.id}/explode`)).status).toBe(404)
  })

  it('acts on many selected jobs, each with its own result', async () => {
    const q = queueOf('bulk')
    const a = await q.add('a', {})
    const b = await q.add('b', {})
    await setState(db, a.id, 'failed')
    await setState(db, b.id, 'failed')
    const waiting = await q.add('c', {})
    const { status, body } = await post(`${open.origin}/api/jobs/actions`, {
      action: 'retry',
      ids: [a.id, b.id, waiting.id, '99999999'],
    })
    expect(status).toBe(200)
    expect(body.results).toEqual([
      { id: a.id, ok: true },
      { id: b.id, ok: true },
      { id: waiting.id, ok: false, error: expect.objectContaining({ code: 'CONFLICT', reason: 'NOT_FAILED' }) },
      { id: '99999999', ok: false, error: expect.objectContaining({ code: 'NOT_FOUND' }) },
    ])
    expect((await storedJob(db, a.id)).state).toBe('waiting')
    expect((await post(`${open.origin}/api/jobs/actions`, { action: 'retry', ids: [] })).status).toBe(400)
    expect((await post(`${open.origin}/api/jobs/actions`, { action: 'nuke', ids: [a.id] })).status).toBe(400)
  })
})

describe('queue, key and scheduler actions', () => {
  it('pauses and resumes a known queue; an unknown one is 404', async () => {
    const q = queueOf('pausable')
    await q.add('x', {})
    expect((await post(`${open.origin}/api/queues/pausable/pause`)).body).toEqual({ ok: true })
    expect(await q.isPaused()).toBe(true)
    expect((await post(`${open.origin}/api/queues/pausable/resume`)).body).toEqual({ ok: true })
    expect(await q.isPaused()).toBe(false)
    expect((await post(`${open.origin}/api/queues/never-seen/pause`)).status).toBe(404)
  })

  it('removes a dedup key (both path segments URL-encoded), so the next add proceeds', async () => {
    const q = queueOf('keys.q')
    const key = 'tenant/7 welcome?'
    const first = await q.add('x', {}, { deduplication: { id: key } })
    const url = `${open.origin}/api/keys/${encodeURIComponent('keys.q')}/${encodeURIComponent(key)}`
    expect((await call(url, { method: 'DELETE' })).body).toEqual({ ok: true, removed: true })
    expect((await call(url, { method: 'DELETE' })).body).toEqual({ ok: true, removed: false })
    const second = await q.add('x', {}, { deduplication: { id: key } })
    expect(second.id).not.toBe(first.id)
  })

  it("runs a scheduler now: its template's job is added with the tick's jobId, its next tick kept", async () => {
    const q = queueOf('ticking')
    await q.upsertJobScheduler('hourly', { every: 3_600_000 }, { name: 'report', data: { n: 1 } })
    const before = (await q.getJobSchedulers())[0]
    const { status, body } = await post(`${open.origin}/api/schedulers/ticking/hourly/run`)
    expect(status).toBe(200)
    const job = await q.getJob(body.jobId)
    expect(job).toMatchObject({ name: 'report', data: { n: 1 }, state: 'waiting' })
    expect(job?.jobId).toMatch(/^sched:ticking:hourly:\d+$/)
    const after = (await q.getJobSchedulers())[0]
    expect(after?.nextRunAt).toEqual(before?.nextRunAt)
    expect(after?.lastRunAt).not.toBeNull()
    expect((await post(`${open.origin}/api/schedulers/ticking/nope/run`)).status).toBe(404)
  })
})

describe('refusals', () => {
  it('read-only (the default): api/config says so, and every action is 403 READ_ONLY and changes nothing', async () => {
    expect((await call(`${readOnly.origin}/api/config`)).body).toEqual({
      readOnly: true,
      actions: {
        retry: false,
        cancel: false,
        remove: false,
        promote: false,
        pause: false,
        resume: false,
        removeKey: false,
        runScheduler: false,
      },
    })
    const q = queueOf('guarded-ro')
    const job = await q.add('x', {}, { deduplication: { id: 'held' }, delay: 600_000 })
    await q.upsertJobScheduler('s', { every: 3_600_000 }, { name: 'x' })
    const refusals = [
      post(`${readOnly.origin}/api/jobs/${job.id}/promote`),
      post(`${readOnly.origin}/api/jobs/${job.id}/cancel`),
      post(`${readOnly.origin}/api/jobs/${job.id}/remove`),
      post(`${readOnly.origin}/api/jobs/actions`, { action: 'remove', ids: [job.id] }),
      post(`${readOnly.origin}/api/queues/guarded-ro/pause`),
      call(`${readOnly.origin}/api/keys/guarded-ro/held`, { method: 'DELETE' }),
      post(`${readOnly.origin}/api/schedulers/guarded-ro/s/run`),
    ]
    for (const r of await Promise.all(refusals)) {
      expect(r).toMatchObject({ status: 403, body: { error: { code: 'READ_ONLY' } } })
    }
    expect((await storedJob(db, job.id)).state).toBe('delayed')
    expect(await q.isPaused()).toBe(false)
    expect(await q.getDeduplicationJobId('held')).toBe(job.id)
    expect((await q.getJobs()).length).toBe(1)
  })

  it('can(action, req) decides per action and request: api/config reflects it, a refusal is 403 FORBIDDEN', async () => {
    const q = queueOf('guarded-can')
    const job = await q.add('x', {}, { delay: 600_000 })
    const admin = { 'x-role': 'admin' }
    const config = (await call(`${guarded.origin}/api/config`, { headers: admin })).body
    expect(config.readOnly).toBe(false)
    expect(config.actions).toMatchObject({ promote: true, remove: false })
    expect(Object.values((await call(`${guarded.origin}/api/config`)).body.actions)).not.toContain(true)
    expect(asked).toContainEqual({ action: 'remove', role: 'admin' })

    expect((await post(`${guarded.origin}/api/jobs/${job.id}/remove`, undefined, admin)).body.error.code).toBe(
      'FORBIDDEN',
    )
    expect((await post(`${guarded.origin}/api/jobs/${job.id}/promote`)).body.error.code).toBe('FORBIDDEN')
    expect((await storedJob(db, job.id)).state).toBe('delayed')
    expect((await post(`${guarded.origin}/api/jobs/${job.id}/promote`, undefined, admin)).status).toBe(200)
    expect((await storedJob(db, job.id)).state).toBe('waiting')
  })

  it('refuses a cross-site browser request with 403 CROSS_SITE; same-origin and header-less clients may act', async () => {
    const q = queueOf('guarded-site')
    await q.add('x', {})
    const url = `${open.origin}/api/queues/guarded-site/pause`
    for (const headers of [
      { 'sec-fetch-site': 'cross-site' } as Record<string, string>,
      { 'sec-fetch-site': 'same-site' },
      { origin: 'http://evil.example' },
      { origin: 'null' },
    ]) {
      expect({ headers, ...(await post(url, undefined, headers)).body }).toEqual({
        headers,
        error: { code: 'CROSS_SITE', message: expect.any(String) },
      })
    }
    expect(await q.isPaused()).toBe(false)
    expect((await post(url, undefined, { 'sec-fetch-site': 'same-origin', origin: open.origin })).status).toBe(200)
    expect(await q.isPaused()).toBe(true)
    expect((await post(`${open.origin}/api/queues/guarded-site/resume`)).status).toBe(200)
    expect(await q.isPaused()).toBe(false)
  })
})
