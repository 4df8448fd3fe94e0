// Worker options are checked before any I/O; errors outside handlers never crash the process (logged without an 'error' listener).

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type Logger, Queue, ValidationError, Worker } from '../src/index.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'
import { storedJob, waitForState } from './helpers/jobs.js'
import { waitFor } from './helpers/wait.js'

let db: TestSchema

beforeAll(async () => {
  db = await freshSchema('worker_errors')
})
afterAll(async () => {
  await db.drop()
})

function capturingLogger(errors: string[]): Logger {
  const noop = () => {}
  const logger: Logger = {
    debug: noop,
    info: noop,
    warn: noop,
    error: (obj, msg) => errors.push(`${msg ?? ''} ${String((obj as { err?: Error }).err?.message ?? '')}`),
    child: () => logger,
  }
  return logger
}

describe('Worker input checks', () => {
  it.each([
    [{ connectionString: 'postgres://x', concurrency: 0 }, 'OUT_OF_RANGE', 'options.concurrency'],
    [{ connectionString: 'postgres://x', concurrency: 1.5 }, 'NOT_INTEGER', 'options.concurrency'],
    [{ connectionString: 'postgres://x', leaseMs: 1000, heartbeatMs: 1000 }, 'OUT_OF_RANGE', 'options.heartbeatMs'],
    [{ connectionString: 'postgres://x', batchsize: 10 }, 'UNKNOWN_OPTION', 'options.batchsize'],
    [{ connectionString: 'postgres://x', schema: 'Bad-Schema' }, 'INVALID_IDENTIFIER', 'options.schema'],
    [{ connectionString: 'postgres://x', autorun: 'yes' }, 'INVALID_TYPE', 'options.autorun'],
    [{}, 'CONFLICTING_OPTIONS', 'options.connectionString'],
  ])('rejects %o with %s on %s', (options, code, field) => {
    const make = () => new Worker('q', async () => {}, options as never)
    expect(make).toThrow(ValidationError)
    expect(make).toThrow(expect.objectContaining({ code, field }))
  })

  it('rejects a bad queue name and a handler that is not a function', () => {
    expect(() => new Worker('bad queue', async () => {}, { connectionString: 'postgres://x' })).toThrow(
      expect.objectContaining({ code: 'INVALID_IDENTIFIER' }),
    )
    expect(() => new Worker('q', 'nope' as never, { connectionString: 'postgres://x' })).toThrow(
      expect.objectContaining({ code: 'INVALID_TYPE', field: 'handler' }),
    )
  })
})

describe('errors outside handlers', () => {
  it('are logged, not thrown, when nobody listens for "error"; the worker keeps trying and closes cleanly', async () => {
    const errors: string[] = []
    // A schema that does not exist: every claim fails.
    const worker = new Worker('q', async () => {}, {
      connectionString: db.url,
      schema: `${db.schema}_missing`,
      migrate: false,
      maintenanceIntervalMs: 0,
      pollIntervalMs: 50,
      logger: capturingLogger(errors),
    })
    await worker.run()
    await waitFor(() => errors.length >= 2, 10_000, 'two failed claims to be logged')
    expect(errors[0]).toMatch(/does not exist/)
    await worker.close()
  })

  it('are emitted as "error" events when someone listens', async () => {
    const seen: Error[] = []
    const worker = new Worker('q', async () => {}, {
      connectionString: db.url,
      schema: `${db.schema}_missing`,
      migrate: false,
      maintenanceIntervalMs: 0,
      pollIntervalMs: 50,
      autorun: false,
    })
    worker.on('error', (err) => seen.push(err))
    await worker.run()
    await waitFor(() => seen.length >= 1, 10_000, 'an error event')
    expect(seen[0]!.message).toMatch(/does not exist/)
    await worker.close()
  })

  it('an unreachable database at start is retried and reported, never thrown; close() still ends it', async () => {
    const errors: string[] = []
    const worker = new Worker('q', async () => {}, {
      connectionString: 'postgres://postgres@127.0.0.1:1/none',
      maintenanceIntervalMs: 0,
      logger: capturingLogger(errors),
    })
    await waitFor(() => errors.length >= 2, 10_000, 'two failed starts to be logged')
    expect(errors[0]).toMatch(/ECONNREFUSED/)
    await worker.close()
  })

  it('a handler result the database refuses is stored as null, without holding back the jobs completed with it', async () => {
    const queue = new Queue<{ i: number }>('results', { connectionString: db.url, schema: db.schema, migrate: false })
    const jobs = await queue.addBulk([0, 1, 2, 3].map((i) => ({ name: 'r', data: { i } })))
    const worker = new Worker<{ i: number }>(
      'results',
      async (job) => {
        // A lone surrogate: JSON.stringify writes it as an escape that jsonb rejects.
        return job.data.i === 2 ? { text: '\ud800' } : { i: job.data.i }
      },
      { connectionString: db.url, schema: db.schema, concurrency: 4, maintenanceIntervalMs: 0, migrate: false },
    )
    try {
      for (const job of jobs) await waitForState(db, job.id, 'completed')
      const results = await Promise.all(jobs.map(async (j) => (await storedJob(db, j.id)).result))
      expect(results).toEqual([{ i: 0 }, { i: 1 }, null, { i: 3 }])
    } finally {
      await worker.close()
      await queue.close()
    }
  })

  it('an error message with a NUL character is stored (as \\0), so the attempt is still recorded', async () => {
    const queue = new Queue('nul', { connectionString: db.url, schema: db.schema, migrate: false })
    const job = await queue.add('n', {}, { attempts: 1 })
    const worker = new Worker(
      'nul',
      async () => {
        throw new Error('bad\u0000byte')
      },
      { connectionString: db.url, schema: db.schema, maintenanceIntervalMs: 0, migrate: false },
    )
    try {
      const row = await waitForState(db, job.id, 'failed')
      expect(row.last_error).toBe('bad\\0byte')
    } finally {
      await worker.close()
      await queue.close()
    }
  })
})
