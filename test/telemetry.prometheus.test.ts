// The Prometheus export of docs/observability.md (examples/prometheus.ts), scraped over HTTP after real adds and runs.

import { createServer } from 'node:net'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { servePrometheus } from '../examples/prometheus.js'
import { Queue, Worker } from '../src/index.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'
import { waitForState } from './helpers/jobs.js'

let db: TestSchema
let port: number
let exporter: ReturnType<typeof servePrometheus>

beforeAll(async () => {
  port = await new Promise<number>((resolve) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const p = (probe.address() as { port: number }).port
      probe.close(() => resolve(p))
    })
  })
  exporter = servePrometheus(port)
  db = await freshSchema('prometheus')
})
afterAll(async () => {
  await exporter.shutdown()
  await db.drop()
})

it('serves pgonce_* metrics with queue and outcome labels on /metrics', async () => {
  const opts = { connectionString: db.url, schema: db.schema, migrate: false }
  const queue = new Queue('scraped', opts)
  const worker = new Worker('scraped', async () => {}, { ...opts, pollIntervalMs: 100, maintenanceIntervalMs: 0 })
  try {
    const job = await queue.add('x', {}, { jobId: 'scrape-1' })
    await queue.add('x', {}, { jobId: 'scrape-1' })
    await waitForState(db, job.id, 'completed')
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text()
    expect(text).toMatch(/pgonce_jobs_added_total\{[^}]*pgonce_queue="scraped"[^}]*pgonce_outcome="added"[^}]*\} 1/)
    expect(text).toMatch(/pgonce_jobs_added_total\{[^}]*pgonce_outcome="duplicate-job-id"[^}]*\} 1/)
    expect(text).toMatch(/pgonce_jobs_runs_total\{[^}]*pgonce_outcome="completed"[^}]*\} 1/)
    expect(text).toMatch(/pgonce_job_duration_count\{[^}]*pgonce_queue="scraped"[^}]*\} 1/)
  } finally {
    await worker.close()
    await queue.close()
  }
})
