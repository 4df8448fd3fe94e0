// The execution side with the Redis layer on: runOnce keys done (until doneTtl) and recorded ledger keys (until retention could prune them) answered from Redis, and no answer from Redis once the fact is gone.

import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Effects, Queue, Worker, runMaintenance } from '../src/index.js'
import { sqlFor } from '../src/db/sql-files.js'
import { REDIS_URL, deleteSchemaKeys, redisAvailable, testClient } from './helpers/redis-support.js'
import { waitFor } from './helpers/wait.js'
import { type TestSchema, freshSchema } from './helpers/schema.js'

const ok = await redisAvailable('redis.effects.test.ts')

describe.skipIf(!ok)('effects with the Redis layer on', () => {
  let db: TestSchema
  let effects: Effects
  let clients: pg.Pool
  let redis: ReturnType<typeof testClient>
  let seq = 0

  beforeAll(async () => {
    db = await freshSchema('redis_effects')
    redis = testClient(REDIS_URL as string)
    effects = new Effects({ connectionString: db.url, schema: db.schema, redis: REDIS_URL })
    clients = new pg.Pool({ connectionString: db.url, max: 4 })
  })
  afterAll(async () => {
    await effects?.close()
    await clients?.end()
    if (redis !== undefined) {
      await deleteSchemaKeys(redis, db.schema)
      redis.disconnect()
    }
    await db?.drop()
  })

  const key = (label: string) => `${label}:${++seq}`
  const sql = (text: string, values: unknown[] = []) => db.pool.query(text.replaceAll('$S', `"${db.schema}"`), values)

  /** effects.record in a committed transaction of its own. */
  async function record(k: string): Promise<boolean> {
    const client = await clients.connect()
    try {
      await client.query('begin')
      const first = await effects.record(client, k)
      await client.query('commit')
      return first
    } finally {
      client.release()
    }
  }

  /** Runs runOnce until its 'duplicate-done' comes from Redis (the entry is written in the background). */
  async function untilDoneFromRedis(k: string, work: () => void): Promise<void> {
    const hits = effects.cacheOutcomes.get('hit')
    await waitFor(
      async () => (await effects.runOnce(k, work)) === 'duplicate-done' && effects.cacheOutcomes.get('hit') > hits,
      5_000,
      `runOnce('${k}') answered from Redis`,
    )
  }

  it("runOnce: a done key is answered 'duplicate-done' from Redis, and not after its doneTtl", async () => {
    let runs = 0
    const work = () => {
      runs++
    }
    const forever = key('done-forever')
    expect(await effects.runOnce(forever, work)).toBe('ran')
    await untilDoneFromRedis(forever, work)
    expect(runs).toBe(1)

    const brief = key('done-brief')
    expect(await effects.runOnce(brief, work, { doneTtl: 500 })).toBe('ran')
    await untilDoneFromRedis(brief, work)
    // Past the marker's expiry by the database clock, with 100 ms for the Redis entry's own TTL to run out too.
    await waitFor(
      async () =>
        (
          await sql(
            `select expires_at + interval '100 milliseconds' <= now() as past from $S.execution_claims where key = $1`,
            [brief],
          )
        ).rows[0]?.past === true,
      5_000,
      'the done marker to expire',
    )
    expect(await effects.runOnce(brief, work, { doneTtl: 500 })).toBe('ran')
    expect(runs).toBe(3)
  })

  it("runOnce: a claim that is running is never answered from Redis ('duplicate-running' each time)", async () => {
    const k = key('running')
    let release!: () => void
    const holder = effects.runOnce(
      k,
      () =>
        new Promise<void>((r) => {
          release = r
        }),
    )
    await waitFor(
      async () => (await sql('select 1 from $S.execution_claims where key = $1', [k])).rowCount === 1,
      5_000,
      'the claim',
    )
    for (let i = 0; i < 5; i++) expect(await effects.runOnce(k, () => {})).toBe('duplicate-running')
    release()
    expect(await holder).toBe('ran')
  })

  it('a done claim deleted by hand runs again once the NOTIFY is in', async () => {
    let runs = 0
    const k = key('done-deleted')
    await effects.runOnce(k, () => {
      runs++
    })
    await untilDoneFromRedis(k, () => {
      runs++
    })
    await sql('delete from $S.execution_claims where key = $1', [k])
    await waitFor(
      async () =>
        (await effects.runOnce(k, () => {
          runs++
        })) === 'ran',
      5_000,
      'the key to run again',
    )
    expect(runs).toBe(2)
  })

  describe('ctx.effect, ctx.runOnce and effects.record', () => {
    let queue: Queue<{ k: string }>
    let worker: Worker<{ k: string }>
    let workerPool: pg.Pool
    /** Ledger statements the worker sent: ctx.effect sends one in its transaction unless Redis answered first. */
    let ledgerStatements = 0
    const charges: string[] = []
    const outcomes: [string, string][] = []

    beforeAll(async () => {
      queue = new Queue('redis-effects', { connectionString: db.url, schema: db.schema })
      // The worker's own pool, counting the ledger statements sent on its connections.
      workerPool = new pg.Pool({ connectionString: db.url, max: 6 })
      const ledgerInsert = sqlFor('effects-record', db.schema)
      workerPool.on('connect', (client) => {
        const query = client.query.bind(client) as (...args: unknown[]) => unknown
        ;(client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
          const text = typeof args[0] === 'string' ? args[0] : (args[0] as { text?: string }).text
          if (text === ledgerInsert) ledgerStatements++
          return query(...args)
        }
      })
      worker = new Worker(
        'redis-effects',
        async (job, ctx) => {
          const effect = await ctx.effect(`charge:${job.data.k}`, async (tx) => {
            charges.push(job.data.k)
            await tx.query('select 1')
          })
          const once = await ctx.runOnce(`mail:${job.data.k}`, () => {})
          outcomes.push([effect, once])
        },
        { pool: workerPool, schema: db.schema, redis: REDIS_URL, pollIntervalMs: 50, maintenanceIntervalMs: 0 },
      )
    })
    afterAll(async () => {
      await worker?.close()
      await queue?.close()
      await workerPool?.end()
    })

    /** Runs the job of `k` until both its pre-checks (ctx.effect, ctx.runOnce) are answered from Redis. */
    async function untilBothFromRedis(k: string): Promise<void> {
      await waitFor(
        async () => {
          const hits = worker.cacheOutcomes.get('hit')
          await runJob(k)
          return worker.cacheOutcomes.get('hit') >= hits + 2
        },
        5_000,
        'both pre-checks answered from Redis',
      )
    }

    async function runJob(k: string): Promise<[string, string]> {
      const before = outcomes.length
      await queue.add('charge', { k })
      await waitFor(() => outcomes.length > before, 10_000, 'the job to run')
      return outcomes[before] as [string, string]
    }

    it('answers a recorded effect and a done runOnce key from Redis: the effect is skipped without opening a transaction', async () => {
      const k = key('invoice')
      const sentBefore = ledgerStatements
      expect(await runJob(k)).toEqual(['ran', 'ran'])
      expect(ledgerStatements, 'the first run writes the ledger row').toBe(sentBefore + 1)
      // The entries are written in the background: the next runs are answered from Redis as soon as they are there.
      await waitFor(
        async () => {
          const statements = ledgerStatements
          const hits = worker.cacheOutcomes.get('hit')
          const answer = await runJob(k)
          expect(answer).toEqual(['duplicate-done', 'duplicate-done'])
          return worker.cacheOutcomes.get('hit') >= hits + 2 && ledgerStatements === statements
        },
        5_000,
        'both pre-checks answered from Redis, no ledger statement sent',
      )
      expect(charges.filter((c) => c === k)).toHaveLength(1)
      // effects.record (any Effects with redis) answers false from the entry ctx.effect wrote.
      await waitFor(
        async () => {
          const hits = effects.cacheOutcomes.get('hit')
          expect(await record(`charge:${k}`)).toBe(false)
          return effects.cacheOutcomes.get('hit') === hits + 1
        },
        5_000,
        'effects.record answered from Redis',
      )
    })

    it('a REPEATABLE READ transaction whose snapshot predates the recording is answered false from Redis (Postgres: 40001)', async () => {
      // One try of the case; 'fallback' when the pre-check declined to answer from Redis (the listener out of sync
      // meanwhile: a periodic resync whose probe NOTIFY or Redis read was slow on a loaded machine), so that Postgres
      // answered, with the 40001 this transaction gets without Redis. Tried again then (three tries in all); any other
      // result fails, and so do three fallbacks.
      const attempt = async (): Promise<'answered' | 'fallback'> => {
        const k = key('rr')
        const a = await clients.connect()
        try {
          await a.query('begin isolation level repeatable read')
          await a.query('select 1') // the snapshot
          expect(await record(k)).toBe(true)
          // The entry as ctx.effect writes it once its transaction found the key recorded (written in the background).
          effects.repeatedEffect(k)
          await waitFor(
            async () => {
              const hits = effects.cacheOutcomes.get('hit')
              expect(await record(k)).toBe(false)
              return effects.cacheOutcomes.get('hit') === hits + 1
            },
            5_000,
            'effects.record answered from Redis',
          )
          const declined = () => effects.cacheOutcomes.get('unsynced') + effects.cacheOutcomes.get('miss')
          const declinedBefore = declined()
          const hits = effects.cacheOutcomes.get('hit')
          try {
            expect(await effects.record(a, k)).toBe(false)
          } catch (err) {
            if ((err as { code?: string }).code === '40001' && declined() > declinedBefore) return 'fallback'
            throw err
          }
          expect(effects.cacheOutcomes.get('hit')).toBe(hits + 1)
          await a.query('commit')
          return 'answered'
        } finally {
          await a.query('rollback').catch(() => {})
          a.release()
        }
      }
      let result = await attempt()
      for (let tries = 1; result === 'fallback' && tries < 3; tries++) result = await attempt()
      expect(result).toBe('answered')
    })

    it('a ledger row deleted by hand is recorded and its effect applied again once the NOTIFY is in', async () => {
      const k = key('refund')
      expect(await runJob(k)).toEqual(['ran', 'ran'])
      await untilBothFromRedis(k)
      await sql('delete from $S.processed_effects where effect_key = $1', [`charge:${k}`])
      await waitFor(async () => (await runJob(k))[0] === 'ran', 5_000, 'the effect to run again')
      expect(charges.filter((c) => c === k)).toHaveLength(2)
    })

    it('with a ledger retention, an entry never outlives the moment its row may be pruned; setting one ends every entry', async () => {
      const k = key('retained')
      expect(await runJob(k)).toEqual(['ran', 'ran'])
      await untilBothFromRedis(k)
      // Cached with no retention (for ever); a retention set now makes the row prunable at once: no more hits for it.
      await effects.setLedgerRetention(300)
      const missesBefore = effects.cacheOutcomes.get('miss')
      expect(await record(`charge:${k}`)).toBe(false)
      expect(effects.cacheOutcomes.get('miss')).toBe(missesBefore + 1)
      await waitFor(
        async () =>
          (
            await sql(
              `select recorded_at + interval '300 milliseconds' < now() as prunable
        from $S.processed_effects where effect_key = $1`,
              [`charge:${k}`],
            )
          ).rows[0]?.prunable === true,
        5_000,
        'the row to be prunable',
      )
      await runMaintenance({ connectionString: db.url, schema: db.schema })
      expect(await runJob(k)).toEqual(['ran', 'duplicate-done'])

      // Cached under a retention: answered from Redis until recorded_at + 1.5 s, then asked again.
      await effects.setLedgerRetention(1_500)
      const fresh = key('retained-fresh')
      expect(await runJob(fresh)).toEqual(['ran', 'ran'])
      await untilBothFromRedis(fresh)
      await waitFor(
        async () => {
          const hits = effects.cacheOutcomes.get('hit')
          await record(`charge:${fresh}`)
          return effects.cacheOutcomes.get('hit') > hits
        },
        1_000,
        'record answered from Redis within the retention',
      )
      // Past recorded_at + 1.5 s by the database clock, with 100 ms for the Redis entry's own TTL to run out too.
      await waitFor(
        async () =>
          (
            await sql(
              `select recorded_at + interval '1600 milliseconds' <= now() as past
        from $S.processed_effects where effect_key = $1`,
              [`charge:${fresh}`],
            )
          ).rows[0]?.past === true,
        5_000,
        'the retention to pass',
      )
      const hits = effects.cacheOutcomes.get('hit')
      expect(await record(`charge:${fresh}`)).toBe(false)
      expect(effects.cacheOutcomes.get('hit')).toBe(hits)
      await effects.setLedgerRetention(null)
    })
  })
})
