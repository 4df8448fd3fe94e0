// The dashboard tests' shared set-up: a dashboard served on a free port of 127.0.0.1, calls to its API, and jobs put
// into a state by SQL (as a worker would leave them).

import http from 'node:http'
import type { AddressInfo } from 'node:net'
import type { DashboardHandler } from '../../src/dashboard/index.js'
import { Queue } from '../../src/index.js'
import type { TestSchema } from './schema.js'

export interface Served {
  /** `http://127.0.0.1:<port>` */
  origin: string
  close(): Promise<void>
}

/** Serves a node:http request listener on a free port. */
export async function serve(listener: http.RequestListener): Promise<Served> {
  const server = http.createServer(listener)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    origin: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}

/** Serves a dashboard handler; closing closes both. */
export async function serveDashboard(handler: DashboardHandler): Promise<Served> {
  const served = await serve(handler)
  return {
    origin: served.origin,
    async close() {
      await served.close()
      await handler.close()
    },
  }
}

// The API's answers are read loosely in the tests (each test states the shape it expects).
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export interface Answer<T = any> {
  status: number
  body: T
  headers: Headers
}

/** Calls `url` and parses its JSON answer. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function call<T = any>(url: string, init?: RequestInit): Promise<Answer<T>> {
  const res = await fetch(url, init)
  const text = await res.text()
  return { status: res.status, body: (text === '' ? null : JSON.parse(text)) as T, headers: res.headers }
}

/** A POST as the UI sends it (JSON content type, same-origin fetch metadata). */
export function post(url: string, body?: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  return call(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  })
}

/** Puts job `id` into a state as a worker would leave it (finished ones `agoMs` ago, by the database clock). */
export async function setState(
  db: TestSchema,
  id: string,
  state: 'failed' | 'active' | 'completed' | 'cancelled',
  opts: { error?: string; agoMs?: number } = {},
): Promise<void> {
  await db.pool.query(
    `update "${db.schema}".jobs set state = $2,
       finished_at = case when $2 = 'active' then null else now() - make_interval(secs => $4::float8 / 1000) end,
       started_at = now(), attempts = 1, last_error = $3::text, error_stack = case when $3::text is null then null else 'Error: ' || $3 || E'\n    at handler (x.js:1:1)' end,
       lock_token = case when $2 = 'active' then gen_random_uuid() end, locked_by = case when $2 = 'active' then 'w1' end,
       locked_until = case when $2 = 'active' then now() + interval '1 minute' end where id = $1`,
    [id, state, opts.error ?? null, opts.agoMs ?? 0],
  )
}

/** Queues on a test's schema, each closed by `close()`. */
export function queuesOn(db: () => TestSchema): { queueOf(name: string): Queue; close(): Promise<void> } {
  const opened: Queue[] = []
  return {
    queueOf(name) {
      const q = new Queue(name, { connectionString: db().url, schema: db().schema })
      opened.push(q)
      return q
    },
    close: async () => {
      await Promise.all(opened.map((q) => q.close()))
    },
  }
}
