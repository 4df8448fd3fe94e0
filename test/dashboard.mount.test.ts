// The dashboard mounted under a base path in Express, Fastify and Hono, each as docs/dashboard.md shows it: the API
// answers under the prefix, an action's JSON body arrives (also behind Express's own JSON parser), the page gets its
// <base href>, and paths outside the prefix stay the host app's.

import type { AddressInfo } from 'node:net'
import { serve as serveHono } from '@hono/node-server'
import express from 'express'
import Fastify from 'fastify'
import { Hono } from 'hono'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue } from '../src/index.js'
import { type DashboardHandler, dashboard } from '../src/dashboard/index.js'
import { type Served, call, post, serve } from './helpers/dashboard.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'

let db: TestSchema
let queue: Queue
const handlers: DashboardHandler[] = []

function mounted(): DashboardHandler {
  const h = dashboard({ connectionString: db.url, schema: db.schema, basePath: '/queues', readOnly: false })
  handlers.push(h)
  return h
}

beforeAll(async () => {
  db = await freshSchema('dash_mount')
  queue = new Queue('mounted', { connectionString: db.url, schema: db.schema })
})

afterAll(async () => {
  await Promise.all(handlers.map((h) => h.close()))
  await queue.close()
  await db.drop()
})

/** What every mount must do, against the host app at `origin`. */
async function checkMount(origin: string): Promise<void> {
  const job = await queue.add('x', {}, { delay: 600_000 })
  const queues = await call(`${origin}/queues/api/queues`)
  expect(queues.status).toBe(200)
  expect(queues.body.queues.map((q: { name: string }) => q.name)).toContain('mounted')
  expect((await call(`${origin}/queues/api/jobs/${job.id}`)).body.job.id).toBe(job.id)
  const bulk = await post(`${origin}/queues/api/jobs/actions`, { action: 'promote', ids: [job.id] })
  expect(bulk).toMatchObject({ status: 200, body: { results: [{ id: job.id, ok: true }] } })
  expect((await queue.getJob(job.id))?.state).toBe('waiting')
  expect((await post(`${origin}/queues/api/jobs/${job.id}/cancel`)).body.job.state).toBe('cancelled')
  const page = await fetch(`${origin}/queues/`)
  if (page.status === 200) expect(await page.text()).toContain('<base href="/queues/">')
  else expect(page.status).toBe(503)
  expect((await call(`${origin}/elsewhere`)).body).toEqual({ host: 'app' })
}

describe('mounted under /queues', () => {
  it('node:http: the handler itself, basePath cut from the whole path', async () => {
    const h = mounted()
    const s = await serve((req, res) => {
      if (req.url?.startsWith('/queues')) return h(req, res)
      res.setHeader('content-type', 'application/json').end(JSON.stringify({ host: 'app' }))
    })
    try {
      await checkMount(s.origin)
    } finally {
      await s.close()
    }
  })

  it("Express: app.use('/queues', handler), behind express.json() too", async () => {
    const app = express()
    app.use(express.json())
    app.use('/queues', mounted())
    app.get('/elsewhere', (_req, res) => {
      res.json({ host: 'app' })
    })
    const s = await serve(app)
    try {
      await checkMount(s.origin)
    } finally {
      await s.close()
    }
  })

  it('Fastify: a scope that leaves bodies unparsed hands the raw request over (reply.hijack)', async () => {
    const app = Fastify()
    const h = mounted()
    await app.register(async (scope) => {
      scope.removeAllContentTypeParsers()
      scope.addContentTypeParser('*', (_req, _payload, done) => done(null))
      const forward = (
        req: { raw: Parameters<DashboardHandler>[0] },
        reply: { hijack(): void; raw: Parameters<DashboardHandler>[1] },
      ) => {
        reply.hijack()
        h(req.raw, reply.raw)
      }
      scope.all('/queues', forward)
      scope.all('/queues/*', forward)
    })
    app.get('/elsewhere', () => ({ host: 'app' }))
    await app.listen({ port: 0, host: '127.0.0.1' })
    try {
      await checkMount(`http://127.0.0.1:${(app.server.address() as AddressInfo).port}`)
    } finally {
      await app.close()
    }
  })

  it("Hono: app.mount('/queues', handler.fetch)", async () => {
    const app = new Hono()
    app.mount('/queues', mounted().fetch)
    app.get('/elsewhere', (c) => c.json({ host: 'app' }))
    const server = serveHono({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' })
    await new Promise<void>((resolve) => server.once('listening', () => resolve()))
    const s: Served = {
      origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      close: () => new Promise<void>((resolve) => server.close(() => resolve())),
    }
    try {
      await checkMount(s.origin)
      // The cross-site rule holds through .fetch too.
      const refused = await post(`${s.origin}/queues/api/queues/mounted/pause`, undefined, {
        origin: 'http://evil.example',
      })
      expect(refused.body.error.code).toBe('CROSS_SITE')
    } finally {
      await s.close()
    }
  })
})
