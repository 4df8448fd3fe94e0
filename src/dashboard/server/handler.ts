// dashboard(): the options checked, one small pool, and a node:http request handler (with `.fetch` and `close()`).

import type { IncomingMessage, ServerResponse } from 'node:http'
import { getRequestListener } from '@hono/node-server'
import { buildApp } from './app.js'
import { DashboardDb } from './db.js'
import { type DashboardOptions, resolveOptions } from './options.js'

/** A node:http request handler that serves the dashboard, also usable as Express middleware. */
export interface DashboardHandler {
  (req: IncomingMessage, res: ServerResponse): void
  /** The same dashboard for a Fetch-API server (Hono's `app.mount`, Bun, Deno): a Request in, a Response out. */
  fetch(request: Request): Promise<Response>
  /** The path it was told it is mounted at ('' for the root). */
  readonly basePath: string
  /** Ends the dashboard's own pool (a pool you passed is left open); requests in flight fail. */
  close(): Promise<void>
}

/**
 * The path of a request relative to basePath: a server that gives the whole path (node:http, Fastify, Hono) has
 * basePath cut off; one that already cut its mount point (Express's `app.use('/queues', handler)`) is taken as it is.
 */
export function relativePath(url: string, basePath: string): string {
  if (basePath === '') return url
  if (url === basePath || url.startsWith(`${basePath}?`)) return `/${url.slice(basePath.length)}`
  if (url.startsWith(`${basePath}/`)) return url.slice(basePath.length)
  return url
}

/**
 * A body parser mounted before the dashboard (Express's `express.json()`) has read the body already: what it parsed is
 * handed on as `rawBody`, which @hono/node-server reads instead of the spent stream.
 */
function adoptParsedBody(req: IncomingMessage): void {
  const r = req as IncomingMessage & { body?: unknown; rawBody?: unknown }
  if (!req.readableEnded || r.body === undefined || r.rawBody !== undefined) return
  r.rawBody = Buffer.from(typeof r.body === 'string' ? r.body : JSON.stringify(r.body), 'utf8')
}

/**
 * The pgonce dashboard (docs/dashboard.md): the UI and its JSON API under `basePath`. Read-only unless `readOnly:
 * false` or `can` allows actions. Options are checked before any I/O (ValidationError naming the field); the pool is
 * opened here and connects on the first request.
 *
 * ### Examples
 * ```ts
 * import http from 'node:http'
 * import { dashboard } from 'pgonce/dashboard'
 *
 * const handler = dashboard({ connectionString: process.env.DATABASE_URL, basePath: '/' })
 * http.createServer(handler).listen(8080, '127.0.0.1')
 * ```
 */
export function dashboard(options: DashboardOptions): DashboardHandler {
  const opts = resolveOptions(options)
  const db = new DashboardDb(opts)
  const app = buildApp(db, opts)
  const listener = getRequestListener((request, env) => app.fetch(request, env))
  const handler = ((req: IncomingMessage, res: ServerResponse) => {
    // Express keeps the whole path in originalUrl and hands over the rest in url; the others give the whole path.
    req.url = relativePath(req.url ?? '/', opts.basePath)
    adoptParsedBody(req)
    void listener(req, res)
  }) as DashboardHandler
  Object.defineProperty(handler, 'basePath', { value: opts.basePath, enumerable: true })
  handler.fetch = (request: Request) => {
    const url = new URL(request.url)
    const path = relativePath(url.pathname, opts.basePath)
    if (path === url.pathname) return Promise.resolve(app.fetch(request))
    url.pathname = path
    return Promise.resolve(app.fetch(new Request(url, request)))
  }
  handler.close = () => db.close()
  return handler
}
