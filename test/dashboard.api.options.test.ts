// What needs no database: dashboard()'s options checked before any I/O (a ValidationError naming the field), the path
// relative to basePath for each kind of server, the cross-site rule, and the UI's files served with their base href,
// CSP and content types (from a folder of this test's, so that the real dist/dashboard-ui is never touched).

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { ValidationError } from '../src/index.js'
import { dashboard } from '../src/dashboard/index.js'
import { CSP, asset, indexHtml } from '../src/dashboard/server/assets.js'
import { isCrossSite } from '../src/dashboard/server/guard.js'
import { relativePath } from '../src/dashboard/server/handler.js'

const url = 'postgres://nobody:pw@127.0.0.1:1/none'

function fieldOf(options: unknown): string {
  try {
    dashboard(options as Parameters<typeof dashboard>[0])
  } catch (err) {
    if (err instanceof ValidationError) return `${err.code} ${err.field}`
    throw err
  }
  return 'accepted'
}

describe('dashboard(options)', () => {
  it('refuses bad options before any I/O, naming the field', () => {
    expect(fieldOf({})).toBe('CONFLICTING_OPTIONS options.connectionString')
    expect(fieldOf({ connectionString: url, pool: {} })).toBe('CONFLICTING_OPTIONS options.connectionString')
    expect(fieldOf({ connectionString: '' })).toBe('INVALID_TYPE options.connectionString')
    expect(fieldOf({ connectionString: url, schema: 'Bad-Schema' })).toBe('INVALID_IDENTIFIER options.schema')
    expect(fieldOf({ connectionString: url, basePath: 'queues' })).toBe('INVALID_TYPE options.basePath')
    expect(fieldOf({ connectionString: url, basePath: '/a/../b' })).toBe('INVALID_TYPE options.basePath')
    expect(fieldOf({ connectionString: url, basePath: '/q?x=1' })).toBe('INVALID_TYPE options.basePath')
    expect(fieldOf({ connectionString: url, readOnly: 'no' })).toBe('INVALID_TYPE options.readOnly')
    expect(fieldOf({ connectionString: url, can: true })).toBe('INVALID_TYPE options.can')
    expect(fieldOf({ connectionString: url, readOnly: true, can: () => true })).toBe('CONFLICTING_OPTIONS options.can')
    expect(fieldOf({ connectionString: url, statementTimeoutMs: 0 })).toBe('OUT_OF_RANGE options.statementTimeoutMs')
    expect(fieldOf({ connectionString: url, logger: {} })).toMatch(/ options\.logger/)
    expect(fieldOf({ connectionString: url, port: 1 })).toBe('UNKNOWN_OPTION options.port')
  })

  it('opens no connection until a request comes (a server that does not exist is no error yet)', async () => {
    const handler = dashboard({ connectionString: url, basePath: '/queues/' })
    expect(handler.basePath).toBe('/queues')
    await handler.close()
  })
})

describe('the path relative to basePath', () => {
  it('cuts basePath from a whole path (node:http, Fastify), takes an already cut one as it is (Express)', () => {
    expect(relativePath('/queues/api/queues', '/queues')).toBe('/api/queues')
    expect(relativePath('/queues', '/queues')).toBe('/')
    expect(relativePath('/queues?x=1', '/queues')).toBe('/?x=1')
    expect(relativePath('/api/queues', '/queues')).toBe('/api/queues')
    expect(relativePath('/queuesx/api', '/queues')).toBe('/queuesx/api')
    expect(relativePath('/api/jobs', '')).toBe('/api/jobs')
  })
})

describe('the cross-site rule', () => {
  const h = (headers: Record<string, string>) => isCrossSite(new Headers({ host: 'ops.example:8080', ...headers }))
  it('refuses another site by Sec-Fetch-Site or Origin, and lets same-origin and header-less requests through', () => {
    expect(h({})).toBe(false)
    expect(h({ 'sec-fetch-site': 'same-origin' })).toBe(false)
    expect(h({ 'sec-fetch-site': 'none' })).toBe(false)
    expect(h({ origin: 'http://ops.example:8080' })).toBe(false)
    expect(h({ 'sec-fetch-site': 'same-site' })).toBe(true)
    expect(h({ 'sec-fetch-site': 'cross-site' })).toBe(true)
    expect(h({ origin: 'http://ops.example' })).toBe(true)
    expect(h({ origin: 'http://evil.example:8080' })).toBe(true)
    expect(h({ origin: 'null' })).toBe(true)
    expect(h({ 'sec-fetch-site': 'same-origin', origin: 'http://evil.example' })).toBe(true)
  })
})

describe("the UI's files", () => {
  const dir = mkdtempSync(join(tmpdir(), 'pgonce-dash-ui-'))
  writeFileSync(join(dir, 'index.html'), '<!doctype html><html><head><title>pgonce</title></head><body></body></html>')
  writeFileSync(join(dir, 'app.js'), 'console.log(1)')
  writeFileSync(join(dir, 'app.css'), 'body{}')
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  it('serves index.html with <base href> right after <head> (basePath escaped), its CSP and nosniff', async () => {
    const res = await indexHtml('/ops/"q"&x', dir)
    expect(res.status).toBe(200)
    expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8')
    expect(res.headers.get('content-security-policy')).toBe(CSP)
    expect(CSP).toBe(
      "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'",
    )
    expect(res.headers.get('x-content-type-options')).toBe('nosniff')
    expect(await res.text()).toContain('<head><base href="/ops/&quot;q&quot;&amp;x/"><title>')
    expect(await (await indexHtml('', dir)).text()).toContain('<head><base href="/">')
  })

  it('serves app.js and app.css with their types and no-cache; a folder never built answers 503 with the hint', async () => {
    const js = await asset('app.js', dir)
    expect([js.headers.get('content-type'), js.headers.get('cache-control')]).toEqual([
      'text/javascript; charset=utf-8',
      'no-cache',
    ])
    expect((await asset('app.css', dir)).headers.get('content-type')).toBe('text/css; charset=utf-8')
    const missing = await indexHtml('/q', join(dir, 'nope'))
    expect(missing.status).toBe(503)
    expect(await missing.text()).toContain('run: npm run build:dashboard-ui')
  })
})
