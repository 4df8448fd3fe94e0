// The dashboard's read routes against a real schema: every GET of api/ answers what the database holds (counts,
// throughput, keyset pages per state, each kind of search, a job's page, held keys, effects and claims, schedulers, the
// failed set by error), bad input is 400 naming the field, a statement stopped by the statement_timeout is 503 without a
// secret, and the UI's page is 503 with a hint when it was never built.

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { dashboard } from '../src/dashboard/index.js'
import { Worker } from '../src/index.js'
import { type Served, call, serveDashboard, queuesOn, setState } from './helpers/dashboard.js'
import { waitForState } from './helpers/jobs.js'
import { waitFor } from './helpers/wait.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'

let db: TestSchema
let served: Served
const queues = queuesOn(() => db)
const queueOf = queues.queueOf
const api = (path: string) => call(`${served.origin}/dash/api/${path}`)

beforeAll(async () => {
  db = await freshSchema('dash_reads')
  served = await serveDashboard(dashboard({ connectionString: db.url, schema: db.schema, basePath: '/dash' }))
})

afterAll(async () => {
  await served.close()
  await queues.close()
  await db.drop()
})

describe('api/queues', () => {
  it('counts each state, the last hour by minute, paused and retention', async () => {
    const q = queueOf('counted')
    const ids = []
    for (let i = 0; i < 8; i++) ids.push((await q.add('x', { i })).id)
    await q.add('later', {}, { delay: 3_600_000 })
    await setState(db, ids[0] as string, 'completed', { agoMs: 5 * 60_000 + 10_000 })
    await setState(db, ids[1] as string, 'completed', { agoMs: 5 * 60_000 + 20_000 })
    await setState(db, ids[2] as string, 'completed', { agoMs: 2 * 3_600_000 })
    await setState(db, ids[3] as string, 'failed', { error: 'boom' })
    await setState(db, ids[4] as string, 'active')
    await setState(db, ids[5] as string, 'cancelled')
    await q.pause()
    await q.setRetention({ completedMs: 60_000 })
    const { status, body } = await api('queues')
    expect(status).toBe(200)
    const counted = body.queues.find((x: { name: string }) => x.name === 'counted')
    expect(counted).toMatchObject({
      paused: true,
      counts: { waiting: 2, delayed: 1, 'waiting-children': 0, active: 1, completed: 3, failed: 1, cancelled: 1 },
      countsEstimated: [],
      retention: { completedMs: 60_000, failedMs: 604_800_000, maxCompleted: null },
      limits: null,
    })
    expect(counted.throughput.completedLastHour).toBe(2)
    expect(counted.throughput.failedLastHour).toBe(1)
    expect(counted.throughput.perMinute).toHaveLength(60)
    // Both finished 5 minutes and some seconds ago: the sixth minute from the end (oldest first).
    expect(counted.throughput.perMinute[54]).toBe(2)
    expect(counted.throughput.perMinute.reduce((a: number, b: number) => a + b, 0)).toBe(2)
  })
})

describe('api/jobs', () => {
  it('pages each state by keyset: no job twice, none left out, next null on the last page', async () => {
    const q = queueOf('paged')
    const ids: string[] = []
    for (let i = 0; i < 5; i++) ids.push((await q.add('x', { i })).id)
    for (const [i, id] of ids.entries()) await setState(db, id, 'completed', { agoMs: (i + 1) * 1_000 })
    const seen: string[] = []
    let after = ''
    for (let page = 0; page < 5; page++) {
      const { body } = await api(`jobs?queue=paged&state=completed&limit=2&after=${after}`)
      seen.push(...body.jobs.map((j: { id: string }) => j.id))
      if (body.next === null) break
      after = body.next
    }
    // Most recently finished first: job i finished i + 1 seconds ago.
    expect(seen).toEqual(ids)
  })

  it('lists waiting in claim order, delayed soonest first, and any state newest first', async () => {
    const q = queueOf('ordered')
    const low = await q.add('low', {}, { priority: 5 })
    const high = await q.add('high', {}, { priority: 1 })
    const soon = await q.add('soon', {}, { delay: 60_000 })
    const late = await q.add('late', {}, { delay: 120_000 })
    const ids = async (query: string) =>
      (await api(`jobs?queue=ordered&${query}`)).body.jobs.map((j: { id: string }) => j.id)
    expect(await ids('state=waiting')).toEqual([high.id, low.id])
    expect(await ids('state=delayed')).toEqual([soon.id, late.id])
    expect(await ids('')).toEqual([late.id, soon.id, high.id, low.id])
    const [summary] = (await api(`jobs?queue=ordered&state=waiting&limit=1`)).body.jobs
    expect(summary).toEqual({
      id: high.id,
      queue: 'ordered',
      name: 'high',
      state: 'waiting',
      jobId: null,
      dedupKey: null,
      priority: 1,
      attempts: 0,
      maxAttempts: 1,
      runAt: expect.any(String),
      createdAt: expect.any(String),
      startedAt: null,
      finishedAt: null,
      lastError: null,
    })
  })

  it('searches by id, custom jobId, dedup key and JSON containment on data', async () => {
    const q = queueOf('searched')
    const byId = await q.add('a', { customer: 1 })
    const byJobId = await q.add('b', { customer: 2 }, { jobId: 'order-77' })
    const byKey = await q.add('c', { customer: 3, tags: ['vip'] }, { deduplication: { id: 'invoice-9' } })
    const names = async (search: string, extra = '') =>
      (await api(`jobs?queue=searched&search=${encodeURIComponent(search)}${extra}`)).body.jobs.map(
        (j: { id: string }) => j.id,
      )
    expect(await names(byId.id)).toEqual([byId.id])
    expect(await names('order-77')).toEqual([byJobId.id])
    expect(await names('invoice-9')).toEqual([byKey.id])
    expect(await names('{"tags":["vip"]}', '&state=waiting')).toEqual([byKey.id])
    expect(await names('{"customer":2}')).toEqual([byJobId.id])
    expect(await names('nothing-by-that-name')).toEqual([])
    // Without a queue: every queue's.
    expect((await api('jobs?search=order-77')).body.jobs.map((j: { id: string }) => j.id)).toEqual([byJobId.id])
  })

  it('refuses a bad state, limit, cursor or JSON search with 400 naming it', async () => {
    for (const [query, field] of [
      ['state=done', 'state'],
      ['limit=0', 'limit'],
      ['limit=201', 'limit'],
      ['after=bm90LWEtY3Vyc29y', 'after'],
      ['search=%7Bnot-json', 'search'],
      ['queue=bad%20name', 'queue'],
    ]) {
      const { status, body } = await api(`jobs?${query}`)
      expect({ query, status, code: body.error.code }).toEqual({ query, status: 400, code: 'BAD_REQUEST' })
      expect(body.error.message).toContain(field)
    }
    // A cursor of another state's list is not this list's.
    const q = queueOf('cursors')
    for (let i = 0; i < 2; i++) await q.add('x', {})
    const { body } = await api('jobs?queue=cursors&state=waiting&limit=1')
    expect((await api(`jobs?queue=cursors&state=delayed&after=${body.next}`)).status).toBe(400)
  })
})

describe('api/jobs/:id', () => {
  it("shows a job's data, error with stack, timeline, dependencies, key, and why it waits", async () => {
    const q = queueOf('detail')
    const parent = await q.add('parent', {})
    const child = await q.add('child', { n: 1 }, { dependsOn: [parent.id], deduplication: { id: 'child-key' } })
    const { body } = await api(`jobs/${child.id}`)
    expect(body.job).toMatchObject({
      id: child.id,
      state: 'waiting-children',
      data: { n: 1 },
      dependencies: { parents: [{ id: parent.id, name: 'parent', state: 'waiting' }], children: [] },
      key: { key: 'child-key', expiresAt: null, held: true },
      effects: [],
      waitsFor: [{ reason: 'parents', detail: '1 of its parents have not completed' }],
    })
    expect(body.job.timeline.map((e: { event: string }) => e.event)).toEqual(['created'])
    const up = (await api(`jobs/${parent.id}`)).body.job
    expect(up.dependencies.children).toEqual([{ id: child.id, name: 'child', state: 'waiting-children' }])

    const delayed = await q.add('d', {}, { delay: 600_000 })
    await q.pause()
    const waits = (await api(`jobs/${delayed.id}`)).body.job.waitsFor
    expect(waits.map((w: { reason: string }) => w.reason)).toEqual(['delay', 'paused'])
    expect(waits[0].until).toEqual(expect.any(String))
    expect((await api(`jobs/${delayed.id}`)).body.job.timeline.map((e: { event: string }) => e.event)).toEqual([
      'created',
      'scheduled',
    ])

    await setState(db, parent.id, 'failed', { error: 'card declined' })
    const failed = (await api(`jobs/${parent.id}`)).body.job
    expect(failed).toMatchObject({ state: 'failed', lastError: 'card declined', waitsFor: [] })
    expect(failed.errorStack).toContain('at handler')
    expect(failed.timeline.map((e: { event: string }) => e.event)).toEqual(['created', 'started', 'failed'])
  })

  it("lists the effects the job's ctx.effect recorded, and the ledger names the job", async () => {
    const q = queueOf('effected')
    const job = await q.add('charge', {})
    const other = await q.add('charge', {})
    const worker = new Worker(
      'effected',
      async (j, ctx) => {
        await ctx.effect(`charge:${j.id}`, async () => {})
        await ctx.effect(`mail:${j.id}`, async () => {})
      },
      { connectionString: db.url, schema: db.schema, migrate: false, pollIntervalMs: 50 },
    )
    try {
      await waitForState(db, job.id, 'completed')
      await waitForState(db, other.id, 'completed')
    } finally {
      await worker.close()
    }
    const { body } = await api(`jobs/${job.id}`)
    expect(body.job.effects.map((e: { key: string }) => e.key)).toEqual([`charge:${job.id}`, `mail:${job.id}`])
    expect(body.job.effects[0].recordedAt).toEqual(expect.any(String))
    const ledger = (await api(`effects?search=${encodeURIComponent(`mail:${job.id}`)}`)).body.effects
    expect(ledger).toEqual([{ key: `mail:${job.id}`, jobId: job.id, recordedAt: expect.any(String) }])
    // The ledger's own test below lists the whole ledger.
    await db.pool.query(`delete from "${db.schema}".processed_effects where job_id is not null`)
  })

  it("shows a queue's limits and slots in use, and a due job held back by a limit says which", async () => {
    const q = queueOf('limited')
    await q.setLimits({ concurrency: 1, rateLimit: { max: 5, durationMs: 600_000 } })
    const first = await q.add('slow', {})
    const second = await q.add('slow', {})
    let release!: () => void
    const gate = new Promise<void>((resolve) => (release = resolve))
    const worker = new Worker('limited', () => gate, {
      connectionString: db.url,
      schema: db.schema,
      migrate: false,
      concurrency: 4,
      pollIntervalMs: 50,
    })
    try {
      await waitForState(db, first.id, 'active')
      const limited = (await api('queues')).body.queues.find((x: { name: string }) => x.name === 'limited')
      expect(limited.limits).toEqual({
        concurrency: 1,
        slotsInUse: 1,
        rateLimit: { max: 5, durationMs: 600_000 },
        startsInWindow: 1,
        heldUntil: null,
        group: null,
      })
      const waits = (await api(`jobs/${second.id}`)).body.job.waitsFor
      expect(waits).toEqual([{ reason: 'limit', detail: "all 1 of queue limited's concurrency slots are in use" }])
      // Unlimited queues answer null.
      const other = (await api('queues')).body.queues.find((x: { name: string }) => x.name !== 'limited')
      expect(other.limits).toBeNull()
    } finally {
      release()
      await waitForState(db, second.id, 'completed')
      await worker.close()
    }
    // The rate window: five starts within ten minutes; the sixth due job is held by the rate limit.
    await q.setLimits({ concurrency: null })
    const more = []
    for (let i = 0; i < 4; i++) more.push(await q.add('fast', {}))
    const sixth = await q.add('fast', {})
    const fast = new Worker('limited', () => undefined, {
      connectionString: db.url,
      schema: db.schema,
      migrate: false,
      pollIntervalMs: 50,
    })
    try {
      for (const job of more.slice(0, 3)) await waitForState(db, job.id, 'completed')
      const held = await waitFor(
        async () => {
          const w = (await api(`jobs/${sixth.id}`)).body.job.waitsFor
          return w.length > 0 ? w : undefined
        },
        10_000,
        'the sixth job held by the rate window',
      )
      expect(held).toEqual([{ reason: 'limit', detail: 'queue limited started 5 jobs within the last 600000 ms' }])
    } finally {
      await fast.close()
    }
    // Group limits: each group id's, and the group slots in use of all groups together.
    await q.setLimits({ rateLimit: null, group: { concurrency: 2, rateLimit: { max: 10, durationMs: 1_000 } } })
    const grouped = (await api('queues')).body.queues.find((x: { name: string }) => x.name === 'limited')
    expect(grouped.limits).toMatchObject({
      concurrency: null,
      rateLimit: null,
      group: { concurrency: 2, rateLimit: { max: 10, durationMs: 1_000 }, slotsInUse: 0 },
    })
    await q.setLimits({ group: null })
  })

  it('answers 404 for a job that does not exist and 400 for a bad id', async () => {
    expect(await api('jobs/99999999')).toMatchObject({ status: 404, body: { error: { code: 'NOT_FOUND' } } })
    expect(await api('jobs/12abc')).toMatchObject({ status: 400, body: { error: { code: 'BAD_REQUEST' } } })
  })
})

describe('api/keys, api/effects, api/schedulers, api/failed', () => {
  it('lists held keys with their owner; looks a key up exactly or by prefix; a key not held is not listed', async () => {
    const q = queueOf('keyed')
    const owner = await q.add('x', {}, { deduplication: { id: 'user:1:welcome', ttl: 600_000 } })
    await q.add('y', {}, { deduplication: { id: 'user:2:welcome' } })
    const gone = await q.add('z', {}, { deduplication: { id: 'user:3:welcome' } })
    await setState(db, gone.id, 'completed')
    const all = (await api('keys?queue=keyed')).body.keys
    expect(all.map((k: { key: string }) => k.key)).toEqual(['user:1:welcome', 'user:2:welcome'])
    expect(all[0]).toMatchObject({ queue: 'keyed', ownerId: owner.id, ownerState: 'waiting', ownerName: 'x' })
    expect(all[0].expiresAt).toEqual(expect.any(String))
    expect(all[1].expiresAt).toBeNull()
    expect(all[0].ageMs).toBeGreaterThanOrEqual(0)
    expect((await api('keys?search=user:2:welcome')).body.keys).toHaveLength(1)
    expect((await api(`keys?search=${encodeURIComponent('user:1*')}`)).body.keys).toHaveLength(1)
    expect((await api('keys?search=user:3:welcome')).body).toEqual({ keys: [], next: null })
    const page = (await api('keys?queue=keyed&limit=1')).body
    expect((await api(`keys?queue=keyed&limit=1&after=${page.next}`)).body.keys[0].key).toBe('user:2:welcome')
  })

  it('lists the effects ledger and runOnce claims', async () => {
    await db.pool.query(`insert into "${db.schema}".processed_effects (effect_key) values ('charge:1'), ('mail:1')`)
    await db.pool.query(
      `insert into "${db.schema}".execution_claims (key, state, token, expires_at) values ('notify:1', 'running', gen_random_uuid(), now() + interval '1 minute')`,
    )
    const { body } = await api('effects')
    expect(body.effects.map((e: { key: string }) => e.key).sort()).toEqual(['charge:1', 'mail:1'])
    expect(body.claims).toEqual([
      { key: 'notify:1', state: 'running', jobId: null, expiresAt: expect.any(String), expired: false },
    ])
    expect((await api('effects?search=charge*')).body.effects.map((e: { key: string }) => e.key)).toEqual(['charge:1'])
  })

  it('lists schedulers with their next and last tick', async () => {
    const q = queueOf('scheduled')
    await q.upsertJobScheduler('nightly', { pattern: '0 3 * * *' }, { name: 'report', data: { kind: 'daily' } })
    const { body } = await api('schedulers')
    expect(body.schedulers).toContainEqual({
      queue: 'scheduled',
      id: 'nightly',
      pattern: '0 3 * * *',
      tz: null,
      everyMs: null,
      nextRunAt: expect.any(String),
      lastRunAt: null,
      name: 'report',
      data: { kind: 'daily' },
      opts: {},
    })
  })

  it('groups the failed set by the first line of the error, newest ids first', async () => {
    const q = queueOf('failing')
    const ids = []
    for (let i = 0; i < 3; i++) ids.push((await q.add('x', {})).id)
    await setState(db, ids[0] as string, 'failed', { error: 'timeout\nmore', agoMs: 3_000 })
    await setState(db, ids[1] as string, 'failed', { error: 'timeout\nother', agoMs: 1_000 })
    await setState(db, ids[2] as string, 'failed', { error: 'bad card', agoMs: 2_000 })
    const { body } = await api('failed?queue=failing')
    expect(body.groups).toEqual([
      { queue: 'failing', error: 'timeout', count: 2, lastAt: expect.any(String), ids: [ids[1], ids[0]] },
      { queue: 'failing', error: 'bad card', count: 1, lastAt: expect.any(String), ids: [ids[2]] },
    ])
    expect(body.sampled).toEqual([])
  })
})

describe('answers', () => {
  it('serves JSON with its charset, and 404 JSON for an unknown api route', async () => {
    const { status, headers, body } = await api('nope')
    expect(status).toBe(404)
    expect(headers.get('content-type')).toBe('application/json; charset=utf-8')
    expect(body.error.code).toBe('NOT_FOUND')
  })

  it('answers 503 TIMEOUT when the statement_timeout stops a query, with no secret in the answer', async () => {
    const password = new URL(db.url).password
    const slow = dashboard({ connectionString: db.url, schema: db.schema, statementTimeoutMs: 300 })
    const s = await serveDashboard(slow)
    // A lock that every read of the jobs table waits behind, until the statement_timeout stops it.
    const locker = await db.pool.connect()
    try {
      await locker.query('begin')
      await locker.query(`lock table "${db.schema}".jobs in access exclusive mode`)
      const answer = await call(`${s.origin}/api/jobs/1`)
      expect(answer).toMatchObject({ status: 503, body: { error: { code: 'TIMEOUT', message: expect.any(String) } } })
      if (password !== '') expect(JSON.stringify(answer.body)).not.toContain(password)
      expect(JSON.stringify(answer.body)).not.toContain(new URL(db.url).host)
      expect(JSON.stringify(answer.body)).not.toContain(db.schema)
    } finally {
      await locker.query('rollback')
      locker.release()
      await s.close()
    }
  })

  it('answers the page with a hint when the UI was never built (or serves it with its CSP)', async () => {
    const res = await fetch(`${served.origin}/dash/`)
    if (res.status === 503) {
      expect(await res.text()).toContain('npm run build:dashboard-ui')
    } else {
      expect(res.status).toBe(200)
      expect(res.headers.get('content-security-policy')).toContain("default-src 'self'")
      expect(await res.text()).toContain('<base href="/dash/">')
    }
  })
})
