// Metrics and traces through @opentelemetry/api, observed with the SDK's in-memory exporters: a producer's trace
// continues on the worker's span, and the counters and histograms match the jobs that ran.

import { context, metrics, propagation, trace } from '@opentelemetry/api'
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks'
import { W3CTraceContextPropagator } from '@opentelemetry/core'
import { type DataPoint, type Histogram, MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics'
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Effects, Queue, Worker, runMaintenance } from '../src/index.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'
import { waitFor } from './helpers/wait.js'
import { waitForState } from './helpers/jobs.js'

/** A reader the test collects from when it wants (no timer). */
class TestReader extends MetricReader {
  protected async onForceFlush(): Promise<void> {}
  protected async onShutdown(): Promise<void> {}
}

const spans = new InMemorySpanExporter()
const reader = new TestReader()
const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] })
const meterProvider = new MeterProvider({ readers: [reader] })

let db: TestSchema

beforeAll(async () => {
  // What an application does once at startup, before it creates pgonce's objects.
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable())
  propagation.setGlobalPropagator(new W3CTraceContextPropagator())
  trace.setGlobalTracerProvider(tracerProvider)
  metrics.setGlobalMeterProvider(meterProvider)
  db = await freshSchema('telemetry')
})
afterAll(async () => {
  await db.drop()
  await meterProvider.shutdown()
  await tracerProvider.shutdown()
})

const opts = () => ({ connectionString: db.url, schema: db.schema, migrate: false })
const workerOpts = () => ({ ...opts(), pollIntervalMs: 100, maintenanceIntervalMs: 0 })

/** The data points of metric `name` now (cumulative), keyed by their attributes as `queue/outcome`. */
async function points(name: string): Promise<Map<string, DataPoint<unknown>>> {
  const { resourceMetrics } = await reader.collect()
  const out = new Map<string, DataPoint<unknown>>()
  for (const scope of resourceMetrics.scopeMetrics) {
    if (scope.scope.name !== 'pgonce') continue
    for (const m of scope.metrics) {
      if (m.descriptor.name !== name) continue
      for (const p of m.dataPoints as DataPoint<unknown>[]) {
        const a = p.attributes
        out.set(
          [a['pgonce.queue'] ?? a['pgonce.schema'], a['pgonce.outcome']].filter((v) => v !== undefined).join('/'),
          p,
        )
      }
    }
  }
  return out
}
const sumOf = async (name: string, key: string) => ((await points(name)).get(key)?.value as number | undefined) ?? 0
const countOf = async (name: string, key: string) =>
  ((await points(name)).get(key)?.value as Histogram | undefined)?.count ?? 0

const finished = (name: string): ReadableSpan[] => spans.getFinishedSpans().filter((s) => s.name === name)
const parentOf = (s: ReadableSpan) => s.parentSpanContext?.spanId

describe('traces', () => {
  it("the worker's span continues the producer's trace: add inside a request's span, run as that add's child", async () => {
    const queue = new Queue<{ n: number }>('traced', opts())
    const inHandler: string[] = []
    const worker = new Worker<{ n: number }>(
      'traced',
      async (job) => {
        // The run's span is active in the handler: a span the handler starts is its child.
        trace.getTracer('app').startActiveSpan('send push', (s) => {
          inHandler.push(s.spanContext().traceId)
          s.end()
        })
        if (job.data.n === 2) throw new Error('boom')
      },
      workerOpts(),
    )
    try {
      const request = trace.getTracer('app').startSpan('POST /comments')
      const [one, two] = await context.with(trace.setSpan(context.active(), request), async () => [
        await queue.add('push', { n: 1 }),
        await queue.add('push', { n: 2 }, { attempts: 1 }),
      ])
      request.end()
      await waitForState(db, one!.id, 'completed')
      await waitForState(db, two!.id, 'failed')
      await waitFor(
        () => finished('process traced').length === 2 && finished('send push').length === 2,
        5_000,
        'the run spans',
      )

      const traceId = request.spanContext().traceId
      const adds = finished('add traced')
      expect(adds).toHaveLength(2)
      for (const add of adds) {
        expect(add.spanContext().traceId).toBe(traceId)
        expect(parentOf(add)).toBe(request.spanContext().spanId)
        expect(add.attributes).toMatchObject({ 'pgonce.queue': 'traced', 'pgonce.outcome': 'added' })
      }
      const runs = finished('process traced')
      for (const run of runs) {
        expect(run.spanContext().traceId).toBe(traceId)
        expect(adds.map((a) => a.spanContext().spanId)).toContain(parentOf(run))
      }
      const failedRun = runs.find((r) => r.attributes['pgonce.job.id'] === two!.id)!
      expect(failedRun.status.code).toBe(2) // SpanStatusCode.ERROR
      expect(failedRun.events.map((e) => e.name)).toContain('exception')
      expect(runs.find((r) => r.attributes['pgonce.job.id'] === one!.id)!.status.code).not.toBe(2)
      for (const child of finished('send push'))
        expect(runs.map((r) => r.spanContext().spanId)).toContain(parentOf(child))
      expect(inHandler).toEqual([traceId, traceId])
    } finally {
      await worker.close()
      await queue.close()
    }
  })

  it('addBulk: one span for the batch, every job of it continuing that trace; no active trace: each run starts its own', async () => {
    const queue = new Queue('bulk-traced', opts())
    const worker = new Worker('bulk-traced', async () => {}, workerOpts())
    try {
      const jobs = await trace.getTracer('app').startActiveSpan('import', async (s) => {
        const added = await queue.addBulk([
          { name: 'a', data: {} },
          { name: 'b', data: {} },
          { name: 'c', data: {} },
        ])
        s.end()
        return added
      })
      const loose = await queue.add('loose', {})
      for (const j of [...jobs, loose]) await waitForState(db, j.id, 'completed')
      await waitFor(() => finished('process bulk-traced').length === 4, 5_000, 'the run spans')
      const [bulk] = finished('addBulk bulk-traced')
      expect(bulk!.attributes['pgonce.items']).toBe(3)
      const runs = finished('process bulk-traced')
      const byJob = (id: string) => runs.find((r) => r.attributes['pgonce.job.id'] === id)!
      for (const j of jobs) expect(parentOf(byJob(j.id))).toBe(bulk!.spanContext().spanId)
      // queue.add outside any trace still gets its own add span, whose trace the run continues.
      const [looseAdd] = finished('add bulk-traced')
      expect(byJob(loose.id).spanContext().traceId).toBe(looseAdd!.spanContext().traceId)
      expect(byJob(loose.id).spanContext().traceId).not.toBe(bulk!.spanContext().traceId)
    } finally {
      await worker.close()
      await queue.close()
    }
  })
})

describe('metrics', () => {
  it('adds by outcome, runs by outcome, duration and wait histograms, active handlers, effect outcomes, rescues', async () => {
    const q = 'metered'
    const queue = new Queue<{ fail?: boolean }>(q, opts())
    let release!: () => void
    const gate = new Promise<void>((r) => (release = r))
    const worker = new Worker<{ fail?: boolean; hold?: boolean }>(
      q,
      async (job, ctx) => {
        if (job.data.hold) await gate
        await ctx.effect(`metered:${job.name}`, async () => {})
        if (job.data.fail) throw new Error('no')
      },
      { ...workerOpts(), concurrency: 4 },
    )
    try {
      const ok = await queue.add('same', {}, { deduplication: { id: 'mk', ttl: 60_000 } })
      expect((await queue.add('same', {}, { deduplication: { id: 'mk', ttl: 60_000 } })).deduplicated).toBe(true)
      const retried = await queue.add('r', { fail: true }, { attempts: 2 })
      await expect(queue.add('x', {}, { dependsOn: ['999999999'] })).rejects.toMatchObject({
        code: 'DEPENDENCY_NOT_FOUND',
      })
      const held = await queue.add('held', { hold: true } as never)
      await waitForState(db, ok.id, 'completed')
      await waitForState(db, retried.id, 'failed')
      await waitForState(db, held.id, 'active')
      expect(await sumOf('pgonce.jobs.active', q)).toBe(1)
      release()
      await waitForState(db, held.id, 'completed')
      await waitFor(async () => (await sumOf('pgonce.jobs.active', q)) === 0, 5_000, 'active back to 0')

      expect(await sumOf('pgonce.jobs.added', `${q}/added`)).toBe(3)
      expect(await sumOf('pgonce.jobs.added', `${q}/duplicate-key`)).toBe(1)
      expect(await sumOf('pgonce.jobs.added', `${q}/rejected`)).toBe(1)
      expect(await sumOf('pgonce.jobs.runs', `${q}/completed`)).toBe(2)
      expect(await sumOf('pgonce.jobs.runs', `${q}/retried`)).toBe(1)
      expect(await sumOf('pgonce.jobs.runs', `${q}/failed`)).toBe(1)
      // one histogram record per run, and the same in the worker's own counters
      expect(await countOf('pgonce.job.duration', q)).toBe(4)
      expect(await countOf('pgonce.job.wait', q)).toBe(4)
      expect(worker.runOutcomes.snapshot()).toEqual({ completed: 2, retried: 1, failed: 1 })
      // the effect of 'r' ran on its first attempt and was skipped on its second
      expect(await sumOf('pgonce.effects', `${q}/ran`)).toBe(3)
      expect(await sumOf('pgonce.effects', `${q}/duplicate-done`)).toBe(1)
      expect(worker.effectOutcomes.snapshot()).toEqual({ ran: 3, 'duplicate-done': 1 })
      expect(queue.outcomes.snapshot()).toEqual({ added: 3, 'duplicate-key': 1, rejected: 1 })
    } finally {
      release()
      await worker.close()
      await queue.close()
    }

    // effects.record, outside any worker: its answers are counted too (no queue attribute).
    const effects = new Effects(opts())
    const client = await db.pool.connect()
    try {
      for (const expected of [true, false]) {
        await client.query('begin')
        expect(await effects.record(client, 'metered:record')).toBe(expected)
        await client.query('commit')
      }
      expect(effects.outcomes.snapshot()).toEqual({ recorded: 1, 'duplicate-done': 1 })
      expect(await sumOf('pgonce.effects', 'recorded')).toBe(1)
      expect(await sumOf('pgonce.effects', 'duplicate-done')).toBe(1)
    } finally {
      client.release()
      await effects.close()
    }

    // A crashed worker's job, rescued by housekeeping: counted by schema.
    const lost = await new Queue('rescued', opts()).add('l', {}, { attempts: 3 })
    await db.pool.query(
      `update "${db.schema}".jobs set state = 'active', attempts = 1, lock_token = gen_random_uuid(),
      locked_until = now() - interval '1 second' where id = $1`,
      [lost.id],
    )
    expect(await runMaintenance({ connectionString: db.url, schema: db.schema })).toMatchObject({ rescued: 1 })
    expect(await sumOf('pgonce.jobs.rescued', db.schema)).toBe(1)
  })
})
