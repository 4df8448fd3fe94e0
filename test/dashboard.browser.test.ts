// The dashboard's UI in headless Chromium against a seeded schema: every view shows the database's rows, a lookup by
// key finds its owner, an allowed action changes the database while a refused one answers 403 and changes nothing,
// a phone-wide screen does not scroll sideways, the keyboard reaches the content, and the page never makes a request
// beyond 127.0.0.1 nor logs a console error.

import { execFile } from 'node:child_process'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { promisify } from 'node:util'
import type { Browser, BrowserContext, Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { dashboard, type DashboardHandler } from '../src/dashboard/index.js'
import { Queue } from '../src/index.js'
import { launchChromium } from './helpers/chromium.js'
import { type DashboardUiSeed, seedDashboardUi } from './helpers/dashboard-ui-seed.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'
import { waitFor } from './helpers/wait.js'

const ROOT = join(import.meta.dirname, '..')
const BASE_PATH = '/ops/queues'

let db: TestSchema
let seed: DashboardUiSeed
let handler: DashboardHandler
let server: http.Server
let origin: string
let browser: Browser
let context: BrowserContext
let page: Page
const requests: string[] = []
/** The path of the request the action test makes to be refused. */
let refusedPath = ''
const problems: string[] = []

beforeAll(async () => {
  await promisify(execFile)('npm', ['run', 'build:dashboard-ui'], { cwd: ROOT, timeout: 60_000 })
  db = await freshSchema('dash_browser')
  seed = await seedDashboardUi(db.url, db.schema)
  // Every action but remove: the UI must hide Remove, and the server must refuse it anyway.
  handler = dashboard({ connectionString: db.url, schema: db.schema, basePath: BASE_PATH, can: (a) => a !== 'remove' })
  server = http.createServer(handler)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  browser = await launchChromium()
  context = await browser.newContext({ viewport: { width: 1280, height: 900 } })
  context.setDefaultTimeout(10_000)
  context.on('request', (request) => requests.push(request.url()))
  context.on('console', (message) => {
    // The one error expected: Chromium logs the 403 of the refused request that the action test makes on purpose.
    if (message.type() === 'error' && !(refusedPath && message.location().url.endsWith(refusedPath))) {
      problems.push(`console: ${message.text()} (${message.location().url})`)
    }
  })
  context.on('weberror', (error) => problems.push(`page error: ${error.error().message}`))
  page = await context.newPage()
})

afterAll(async () => {
  await browser?.close()
  await new Promise((resolve) => server?.close(resolve))
  await handler?.close()
  await db?.drop()
})

async function open(hash: string): Promise<void> {
  await page.goto(`${origin}${BASE_PATH}/#/${hash}`)
}

/** The cells of the table row that holds `text`, as the user reads them. */
async function rowText(text: string): Promise<string> {
  const row = page.locator('tbody tr', { hasText: text }).first()
  await row.waitFor()
  return (await row.innerText()).replace(/\s+/g, ' ')
}

async function count(where: string, ...values: unknown[]): Promise<number> {
  const { rows } = await db.pool.query(`select count(*)::int as n from "${db.schema}".jobs where ${where}`, values)
  return rows[0].n
}

async function stateOf(id: string): Promise<string | undefined> {
  const { rows } = await db.pool.query(`select state from "${db.schema}".jobs where id = $1`, [id])
  return rows[0]?.state
}

describe('the dashboard in a browser', () => {
  it("queues: the counts per state are the database's, the paused queue says so, throughput is drawn", async () => {
    // The page runs under the server's strict CSP, so the console check at the end also proves no inline script or style.
    const response = await page.goto(`${origin}${BASE_PATH}/#/queues`)
    expect(response?.headers()['content-security-policy']).toContain("script-src 'self'")
    const completed = page.getByLabel('orders completed', { exact: true })
    await page.getByRole('heading', { name: 'Queues' }).waitFor()
    expect(await completed.innerText()).toBe(String(await count(`queue = 'orders' and state = 'completed'`)))
    expect(await page.getByLabel('orders failed', { exact: true }).innerText()).toBe('3')
    expect(await page.getByLabel('emails waiting-children', { exact: true }).innerText()).toBe('1')
    expect(await rowText('reports')).toContain('paused')
    expect(await rowText('emails')).toContain(
      '0 of 3 running, 0 of 100 starts per 1 min; per group: 1 running (0 group slots in use)',
    )
    expect(await rowText('orders')).toContain('2 done, 3 failed')
    expect(await page.locator('svg.spark rect').count()).toBeGreaterThan(0)
  })

  it('jobs: by queue and state, and searched by id, jobId/key and JSON containment on data', async () => {
    await open('jobs?queue=orders&state=failed')
    await page.locator('tbody tr').first().waitFor()
    expect(await page.locator('tbody tr').count()).toBe(3)
    expect(await rowText(`#${seed.failed[0]}`)).toContain('card declined: insufficient funds')

    await page.getByLabel('Search').fill('welcome:ann')
    await page.getByLabel('State').selectOption('')
    await page.getByLabel('Queue').selectOption('')
    await page.getByLabel('Search').press('Enter')
    await page.waitForURL(/search=welcome%3Aann/)
    await page.locator('tbody tr', { hasText: `#${seed.keyOwner}` }).waitFor()
    expect(await page.locator('tbody tr').count()).toBe(1)

    await open('jobs?queue=orders&limit=2')
    const pages: string[][] = []
    for (;;) {
      await page.locator('tbody tr').first().waitFor()
      pages.push(await page.locator('tbody tr td[data-label="Id"]').allInnerTexts())
      const next = page.getByRole('link', { name: 'Next page' })
      if ((await next.count()) === 0) break
      await next.click()
      // The page is read once its rows are the next page's: the last page's first job has gone.
      const shown = page.locator('tbody tr td[data-label="Id"]', { hasText: new RegExp(`^${pages.at(-1)![0]}$`) })
      await shown.waitFor({ state: 'detached' })
    }
    expect(pages.flat().sort()).toEqual([...seed.completed, ...seed.failed].map((id) => `#${id}`).sort())
    expect(pages.slice(0, -1).every((ids) => ids.length === 2)).toBe(true)

    await open(`jobs?search=${encodeURIComponent('{"customer":"bob"}')}`)
    expect(await rowText('charge')).toContain(`#${seed.completed[1]}`)
    await open(`jobs?search=${seed.delayed}`)
    expect(await rowText('reminder')).toContain('delayed')
  })

  it("a job's page: data, result, progress, error with its stack, timeline, dependencies, its key, why it waits", async () => {
    await open(`jobs/${seed.failed[0]}`)
    await page.getByRole('heading', { name: `Job #${seed.failed[0]}` }).waitFor()
    expect(await page.getByLabel('Stack trace').innerText()).toContain('Error: card declined: insufficient funds')
    expect(await page.locator('pre[aria-label="Data"]').innerText()).toContain('"customer": "cy"')
    expect(await page.locator('.timeline').innerText()).toMatch(/failed/)

    await open(`jobs/${seed.completed[0]}`)
    expect(await page.locator('pre[aria-label="Result"]').innerText()).toContain('"charged": 10')
    expect(await page.locator('pre[aria-label="Progress"]').innerText()).toContain('"step": "charged"')
    // The effect its handler's ctx.effect recorded (the ledger names the job).
    expect(await page.getByRole('list', { name: 'Effects' }).innerText()).toMatch(/charge:\d+/)

    await open(`jobs/${seed.child}`)
    expect(await page.getByLabel('Why it waits').innerText()).toMatch(/parents/)
    await page
      .locator('section[aria-label="Dependencies"]')
      .getByRole('link', { name: `#${seed.parent}` })
      .waitFor()

    await open(`jobs/${seed.pausedJob}`)
    expect(await page.getByLabel('Why it waits').innerText()).toContain('queue reports is paused')
    await open(`jobs/${seed.delayed}`)
    expect(await page.getByLabel('Why it waits').innerText()).toMatch(/delay: .* in (59|60) min/)

    await open(`jobs/${seed.keyOwner}`)
    expect(await page.locator('section[aria-label="Dedup key"]').innerText()).toContain('welcome:ann held until')
  })

  it('keys: a lookup by key names its owner and why an add is deduplicated; an unheld key says it is not', async () => {
    await open('keys')
    expect(await rowText('digest:bob')).toMatch(/in (59|60) min/)
    expect(await rowText('welcome:ann')).toContain('until the owner finishes')
    await page.getByLabel('Key', { exact: true }).fill('welcome:ann')
    await page.getByLabel('Key', { exact: true }).press('Enter')
    const why = page.getByRole('status').filter({ hasText: 'Why an add with this key is deduplicated' })
    await why.getByRole('link', { name: `#${seed.keyOwner}` }).waitFor()
    expect(await why.innerText()).toContain('(waiting) holds it until it finishes')

    await open('keys?search=nobody-holds-this')
    await page.getByText('No job holds the key "nobody-holds-this"').waitFor()
  })

  it('effects and runOnce claims, schedulers, and the failed set grouped by error', async () => {
    await open('effects')
    expect(await rowText('charge:1')).toMatch(/ago/)
    expect(await rowText('charge:1')).toMatch(/#\d+/)
    expect(await rowText('charge:2')).toMatch(/ago/)
    expect(await rowText('receipt:2')).toContain('done')
    await open('schedulers')
    expect(await rowText('daily-digest')).toContain('0 8 * * *')
    await open('failed')
    expect(await rowText('card declined')).toMatch(/orders card declined: insufficient funds 2/)
    expect(await rowText('gateway')).toContain(`#${seed.failed[2]}`)
  })

  it('an allowed action changes the database; a refused one is hidden and its request answers 403, changing nothing', async () => {
    const id = seed.failed[0]!
    await open(`jobs/${id}`)
    await page.getByRole('button', { name: 'Retry' }).click()
    await page
      .getByRole('status')
      .filter({ hasText: `Job #${id}: retry done` })
      .waitFor()
    await waitFor(async () => (await stateOf(id)) === 'waiting', 5_000, 'the retried job to wait')
    await page.locator('h1 .badge', { hasText: 'waiting' }).waitFor()

    expect(await page.getByRole('button', { name: 'Remove' }).count()).toBe(0)
    refusedPath = `/api/jobs/${id}/remove`
    expect(await page.getByRole('button', { name: 'Cancel' }).count()).toBe(1)
    const refused = await page.evaluate(async (path) => {
      const response = await fetch(path, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{}',
      })
      return { status: response.status, body: (await response.json()) as { error: { code: string } } }
    }, refusedPath.slice(1))
    expect(refused).toEqual({ status: 403, body: { error: expect.objectContaining({ code: 'FORBIDDEN' }) } })
    expect(await stateOf(id)).toBe('waiting')
  })

  it('many selected jobs retried at once; a queue paused, a scheduler run and a key removed by their buttons', async () => {
    const [, second, third] = seed.failed
    await open('jobs?queue=orders&state=failed')
    await page.getByLabel(`Select job ${second}`).check()
    await page.getByLabel(`Select job ${third}`).check()
    await page.getByRole('button', { name: 'Retry selected' }).click()
    await page.getByRole('status').filter({ hasText: 'retry: 2 of 2 done' }).waitFor()
    expect([await stateOf(second!), await stateOf(third!)]).toEqual(['waiting', 'waiting'])

    await open('queues')
    await page.locator('tbody tr', { hasText: 'emails' }).getByRole('button', { name: 'Pause' }).click()
    await page.locator('tbody tr', { hasText: 'emails' }).getByRole('button', { name: 'Resume' }).waitFor()
    const paused = await db.pool.query(`select paused from "${db.schema}".queue_settings where queue = 'emails'`)
    expect(paused.rows).toEqual([{ paused: true }])

    const digests = await count(`queue = 'emails' and name = 'digest'`)
    await open('schedulers')
    await page.getByRole('button', { name: 'Run now' }).click()
    await page
      .getByRole('status')
      .filter({ hasText: /Scheduler daily-digest added job #\d+/ })
      .waitFor()
    expect(await count(`queue = 'emails' and name = 'digest'`)).toBe(digests + 1)

    await open('keys?search=digest%3Abob')
    page.once('dialog', (dialog) => void dialog.accept())
    await page.getByRole('button', { name: 'Remove key' }).click()
    await page.getByText('No job holds the key "digest:bob"').waitFor()
    const keys = await db.pool.query(
      `select count(*)::int as n from "${db.schema}".dedup_keys where key = 'digest:bob'`,
    )
    expect(keys.rows[0].n).toBe(0)
  })

  it('a view follows the database without a reload', async () => {
    await open(`jobs?queue=live`)
    await page.getByText('No job matches.').waitFor()
    const navigations: string[] = []
    page.on('framenavigated', (frame) => navigations.push(frame.url()))
    const live = new Queue('live', { connectionString: db.url, schema: db.schema, migrate: false })
    const job = await live.add('appears', {}).finally(() => live.close())
    await page.locator('tbody tr', { hasText: `#${job.id}` }).waitFor({ timeout: 6_000 })
    expect(navigations).toEqual([])
  })

  it('a phone-wide screen: no sideways scroll; the keyboard reaches the content by the skip link', async () => {
    // Expressions as text: the repository's tsconfig has no DOM types (only src/dashboard/ui/tsconfig.json does).
    const phone = await context.newPage()
    try {
      await phone.setViewportSize({ width: 390, height: 844 })
      for (const hash of ['queues', 'jobs?queue=orders', `jobs/${seed.failed[1]}`, 'keys']) {
        await phone.goto(`${origin}${BASE_PATH}/#/${hash}`)
        await phone.locator('main h1').waitFor()
        await phone.locator('main table, main .facts').first().waitFor()
        const width = await phone.evaluate<number>('document.documentElement.scrollWidth')
        expect({ hash, width }).toEqual({ hash, width: 390 })
      }
      // A fresh load (a new hash alone would move the focus to the view's title, as a route change does).
      await phone.goto(`${origin}${BASE_PATH}/#/queues`)
      await phone.reload()
      await phone.locator('main tbody tr').first().waitFor()
      await phone.keyboard.press('Tab')
      expect(await phone.evaluate<string>('document.activeElement.textContent')).toBe('Skip to content')
      await phone.keyboard.press('Enter')
      expect(await phone.evaluate<string>('document.activeElement.id')).toBe('main')
    } finally {
      await phone.close()
    }
  })

  it('no request left 127.0.0.1, and no console error was logged', async () => {
    expect(requests.length).toBeGreaterThan(20)
    expect(requests.filter((url) => new URL(url).hostname !== '127.0.0.1')).toEqual([])
    expect(problems).toEqual([])
  })
})
