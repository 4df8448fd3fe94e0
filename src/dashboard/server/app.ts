// The routes of the dashboard (Hono): the UI's files and the JSON API under api/, on paths relative to basePath.

import { Hono, type Context } from 'hono'
import { bodyLimit } from 'hono/body-limit'
import { asset, indexHtml } from './assets.js'
import { JOB_ACTIONS, type JobAction, jobAction, queueAction, removeKey, runScheduler } from './actions.js'
import type { DashboardDb } from './db.js'
import { authorize, permissions, refuseEarly } from './guard.js'
import { ApiError, STATUS, badRequest, toApiError } from './http-error.js'
import { getJobDetail } from './job.js'
import { listJobs } from './jobs.js'
import { failedGroups, listEffects, listKeys, listSchedulers } from './lists.js'
import type { DashboardAction, DashboardRequest, ResolvedOptions } from './options.js'
import { listQueues } from './queues.js'

/** Hono's bindings: node's request when served through the node:http handler, nothing through `.fetch`. */
type Env = { Bindings: { incoming?: DashboardRequest } | undefined }

/** Most jobs one bulk action takes. */
export const MAX_BULK = 200

function json(body: unknown, status = 200): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: {
      'content-type': 'application/json; charset=utf-8',
      'cache-control': 'no-store',
      'x-content-type-options': 'nosniff',
    },
  })
}

export function errorResponse(err: ApiError): Response {
  return json({ error: err }, STATUS[err.code])
}

const requestOf = (c: Context<Env>): DashboardRequest => c.env?.incoming ?? c.req.raw

export function buildApp(db: DashboardDb, opts: ResolvedOptions): Hono<Env> {
  const app = new Hono<Env>()
  const act = (c: Context<Env>, action: DashboardAction) => authorize(opts, action, requestOf(c), c.req.raw.headers)

  app.onError((err) => {
    const { error, unexpected } = toApiError(err)
    if (unexpected) opts.logger.error({ err }, 'pgonce dashboard: a request failed')
    return errorResponse(error)
  })
  app.notFound((c) =>
    c.req.path.startsWith('/api/')
      ? errorResponse(new ApiError('NOT_FOUND', `no route ${c.req.method} ${c.req.path}`))
      : new Response('not found\n', { status: 404, headers: { 'content-type': 'text/plain; charset=utf-8' } }),
  )

  app.get('/', () => indexHtml(opts.basePath))
  app.get('/index.html', () => indexHtml(opts.basePath))
  app.get('/app.js', () => asset('app.js'))
  app.get('/app.css', () => asset('app.css'))

  app.get('/api/config', async (c) => json(await permissions(opts, requestOf(c))))
  app.get('/api/queues', async () => json(await listQueues(db)))
  app.get('/api/jobs', async (c) => json(await listJobs(db, c.req.query())))
  app.get('/api/jobs/:id', async (c) => json(await getJobDetail(db, c.req.param('id'))))
  app.get('/api/keys', async (c) => json(await listKeys(db, c.req.query())))
  app.get('/api/effects', async (c) => json(await listEffects(db, c.req.query())))
  app.get('/api/schedulers', async () => json(await listSchedulers(db)))
  app.get('/api/failed', async (c) => json(await failedGroups(db, c.req.query())))

  app.post(
    '/api/jobs/actions',
    bodyLimit({ maxSize: 64 * 1024, onError: () => errorResponse(badRequest('body: at most 64 KiB')) }),
    async (c) => {
      refuseEarly(opts, c.req.raw.headers)
      const body = await readJson(c)
      const action = body.action as JobAction
      if (!JOB_ACTIONS.includes(action)) throw badRequest(`action: must be one of ${JOB_ACTIONS.join(', ')}`)
      const ids = body.ids
      if (
        !Array.isArray(ids) ||
        ids.length === 0 ||
        ids.length > MAX_BULK ||
        !ids.every((i) => typeof i === 'string')
      ) {
        throw badRequest(`ids: must be 1 to ${MAX_BULK} job ids (strings)`)
      }
      await act(c, action)
      const results = []
      for (const id of ids) {
        try {
          await jobAction(db, action, id)
          results.push({ id, ok: true })
        } catch (err) {
          const { error, unexpected } = toApiError(err)
          if (unexpected) opts.logger.error({ err, id, action }, 'pgonce dashboard: a bulk action failed')
          results.push({ id, ok: false, error })
        }
      }
      return json({ results })
    },
  )
  app.post('/api/jobs/:id/:action', async (c) => {
    const action = c.req.param('action') as JobAction
    if (!JOB_ACTIONS.includes(action)) throw new ApiError('NOT_FOUND', `no action ${action}`)
    await act(c, action)
    return json(await jobAction(db, action, c.req.param('id')))
  })
  app.post('/api/queues/:queue/:action', async (c) => {
    const action = c.req.param('action')
    if (action !== 'pause' && action !== 'resume') throw new ApiError('NOT_FOUND', `no action ${action}`)
    await act(c, action)
    return json(await queueAction(db, action, c.req.param('queue')))
  })
  app.delete('/api/keys/:queue/:key', async (c) => {
    await act(c, 'removeKey')
    return json(await removeKey(db, c.req.param('queue'), c.req.param('key')))
  })
  app.post('/api/schedulers/:queue/:id/run', async (c) => {
    await act(c, 'runScheduler')
    return json(await runScheduler(db, c.req.param('queue'), c.req.param('id')))
  })
  return app
}

async function readJson(c: Context<Env>): Promise<Record<string, unknown>> {
  let body: unknown
  try {
    body = JSON.parse(await c.req.text())
  } catch {
    throw badRequest('body: must be JSON')
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw badRequest('body: must be a JSON object')
  return body as Record<string, unknown>
}
