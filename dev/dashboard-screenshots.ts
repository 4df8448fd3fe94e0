// `npx tsx dev/dashboard-screenshots.ts`: the screenshots of docs/dashboard.md, taken again. It builds the UI, seeds a
// schema of its own with the jobs of the browser test (test/helpers/dashboard-ui-seed.ts), serves the dashboard on
// 127.0.0.1 with every action allowed, and photographs each view in headless Chromium into docs/images/; the schema is
// dropped at the end. Postgres: DATABASE_URL, else an embedded server (dev/postgres-server.ts).

import { execFile } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import pg from 'pg'
import { migrate } from '../src/index.js'
import { dashboard } from '../src/dashboard/index.js'
import { launchChromium } from '../test/helpers/chromium.js'
import { seedDashboardUi } from '../test/helpers/dashboard-ui-seed.js'
import { startPostgres } from './postgres-server.js'

const root = fileURLToPath(new URL('..', import.meta.url))
const images = `${root}docs/images/`

process.env.PGONCE_TEST_POSTGRES ??= process.env.DATABASE_URL?.trim() ? 'env' : 'embedded'
await promisify(execFile)('npm', ['run', 'build:dashboard-ui'], { cwd: root, timeout: 120_000 })
const postgres = await startPostgres((line) => console.log(line))
const schema = `screens_${randomBytes(4).toString('hex')}`
const pool = new pg.Pool({ connectionString: postgres.url, max: 1 })
const handler = dashboard({ connectionString: postgres.url, schema, readOnly: false })
const server = http.createServer(handler)
const browser = await launchChromium()
try {
  await migrate({ connectionString: postgres.url, schema })
  const seed = await seedDashboardUi(postgres.url, schema)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const shots: { name: string; hash: string; wait: string; width?: number }[] = [
    { name: 'queues', hash: 'queues', wait: 'tbody tr' },
    { name: 'jobs', hash: 'jobs?queue=orders', wait: 'tbody tr' },
    { name: 'job', hash: `jobs/${seed.failed[0]}`, wait: '.stack-trace' },
    { name: 'keys', hash: 'keys?search=welcome%3Aann', wait: 'tbody tr' },
    { name: 'effects', hash: 'effects', wait: 'tbody tr' },
    { name: 'schedulers', hash: 'schedulers', wait: 'tbody tr' },
    { name: 'failed', hash: 'failed', wait: 'tbody tr' },
    { name: 'phone', hash: 'queues', wait: 'tbody tr', width: 390 },
  ]
  for (const shot of shots) {
    const page = await browser.newPage({
      viewport: { width: shot.width ?? 1280, height: shot.width ? 844 : 720 },
      colorScheme: 'light',
    })
    await page.goto(`${origin}/#/${shot.hash}`)
    await page.locator(shot.wait).first().waitFor({ timeout: 10_000 })
    await page.screenshot({ path: `${images}dashboard-${shot.name}.png`, fullPage: !shot.width })
    await page.close()
    console.log(`docs/images/dashboard-${shot.name}.png`)
  }
} finally {
  await browser.close()
  await new Promise((resolve) => server.close(resolve))
  await handler.close()
  await pool.query(`drop schema if exists "${schema}" cascade`)
  await pool.end()
  await postgres.stop()
}
