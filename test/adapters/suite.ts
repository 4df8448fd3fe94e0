// The one body every transaction adapter runs (test/adapters/*.test.ts): a real library, a real server, a fresh schema.
// Commit, rollback, a savepoint, parameter encoding (arrays, jsonb, large integers, unicode, 1 MB), dedup keys and
// jobIds, the wake-up, and a lock timeout inside the ORM's transaction (docs/transactions.md).

import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Effects, type Transactional, QueryTimeoutError, Queue } from '../../src/index.js'
import { channelOf } from '../../src/db/identifiers.js'
import { type TestSchema, freshSchema } from '../helpers/schema.js'
import { waitFor } from '../helpers/wait.js'

/** What a test file tells the suite about its library. */
export interface Harness {
  /** Opens the library's connection to `url` (a pool of at most 2). */
  open(url: string): Promise<void>
  close(): Promise<void>
  /** Runs `fn` in the library's transaction: committed when it resolves, rolled back (and rethrown) when it throws. */
  transaction<T>(fn: (tx: never) => Promise<T>): Promise<T>
  /** Runs `fn` in a savepoint (nested transaction) of `tx`, rolled back when it throws; absent: the library has none. */
  savepoint?<T>(tx: never, fn: (sp: never) => Promise<T>): Promise<T>
  /** Runs one statement of the test's own on `tx` through the library's API. */
  exec(tx: never, text: string): Promise<unknown>
  /** The library's named helper (`fromDrizzle`…). */
  wrap(tx: never): Transactional
  /**
   * What the library's transaction call does when its callback returns normally after a statement failed in it:
   * 'resolves' (it sent COMMIT, which the server answered as a rollback) or 'rejects' (with that statement's error).
   */
  afterAbort: 'resolves' | 'rejects'
}

/** The message of an error or of the driver error an ORM wrapped in it. */
const messageOf = (err: unknown): string =>
  `${(err as Error | undefined)?.message} ${((err as Error | undefined)?.cause as Error | undefined)?.message}`

const ROLL_BACK = new Error('roll it back')

export function adapterSuite(label: string, harness: Harness): void {
  describe(`${label}: pgonce writes inside the library's transaction`, () => {
    let db: TestSchema
    let queue: Queue<Record<string, unknown>>
    let listener: pg.Client
    const heard: string[] = []
    const S = (): string => `"${db.schema}"`

    beforeAll(async () => {
      db = await freshSchema(`adapters_${label}`)
      queue = new Queue('adapters', { connectionString: db.url, schema: db.schema, poolSize: 2 })
      await harness.open(db.url)
      // A sleeping worker, as an add sees one: an idle slot held, and LISTEN on the schema's channel.
      listener = new pg.Client({ connectionString: db.url })
      await listener.connect()
      listener.on('notification', (n) => heard.push(n.payload ?? ''))
      await listener.query(`listen "${channelOf(db.schema)}"`)
      await listener.query(`select pg_advisory_lock(${S()}._idle_slot_key('adapters', 0))`)
    })
    afterAll(async () => {
      await listener?.end()
      await harness.close()
      await queue?.close()
      await db?.drop()
    })

    const count = async (table: 'jobs' | 'dedup_keys', where: string, value: unknown): Promise<number> =>
      (await db.pool.query(`select count(*)::int as n from ${S()}.${table} where ${where} = $1`, [value])).rows[0].n

    /** Every notification sent before now has arrived: a barrier of our own on the same channel. */
    async function settleNotifications(): Promise<string[]> {
      const mark = `barrier-${heard.length}-${Math.random()}`
      await db.pool.query('select pg_notify($1, $2)', [channelOf(db.schema), mark])
      await waitFor(() => heard.includes(mark), 5_000, 'the barrier notification')
      return heard.splice(0).filter((p) => !p.startsWith('barrier-'))
    }

    it('commit: the job, its key and its jobId appear with the commit, and so does the wake-up', async () => {
      await settleNotifications()
      const name = 'commit'
      const ids = await harness.transaction(async (tx) => {
        const job = await queue.add(name, { n: 1 }, { tx, jobId: 'commit-1', deduplication: { id: 'commit-key' } })
        const bulk = await queue.addBulk(
          [
            { name, data: { n: 2 } },
            { name, data: { n: 3 }, opts: { deduplication: { id: 'commit-key-2' } } },
          ],
          { tx },
        )
        expect(await count('jobs', 'name', name)).toBe(0)
        expect(await count('dedup_keys', 'key', 'commit-key')).toBe(0)
        return [job.id, ...bulk.map((j) => j.id)]
      })
      expect(await count('jobs', 'name', name)).toBe(3)
      expect(await count('dedup_keys', 'key', 'commit-key')).toBe(1)
      expect((await queue.getJobByCustomId('commit-1'))?.id).toBe(ids[0])
      expect(await queue.getDeduplicationJobId('commit-key-2')).toBe(ids[2])
      await waitFor(() => heard.includes('adapters'), 5_000, 'the wake-up of the commit')
    })

    it('rollback: no job, no key, no wake-up', async () => {
      await settleNotifications()
      const run = harness.transaction(async (tx) => {
        await queue.add('rollback', { n: 1 }, { tx, jobId: 'rollback-1', deduplication: { id: 'rollback-key' } })
        await queue.addBulk([{ name: 'rollback', data: { n: 2 } }], { tx })
        throw ROLL_BACK
      })
      await expect(run).rejects.toBe(ROLL_BACK)
      expect(await count('jobs', 'name', 'rollback')).toBe(0)
      expect(await count('dedup_keys', 'key', 'rollback-key')).toBe(0)
      expect(await queue.getJobByCustomId('rollback-1')).toBeNull()
      expect(await settleNotifications()).toEqual([])
    })

    it.skipIf(harness.savepoint === undefined)('a savepoint rolled back takes only its own adds', async () => {
      await harness.transaction(async (tx) => {
        await queue.add('sp-outer', { n: 1 }, { tx, deduplication: { id: 'sp-outer' } })
        await expect(
          harness.savepoint!(tx, async (sp) => {
            await queue.add('sp-inner', { n: 2 }, { tx: sp, deduplication: { id: 'sp-inner' } })
            throw ROLL_BACK
          }),
        ).rejects.toBe(ROLL_BACK)
        await harness.savepoint!(tx, async (sp) => {
          await queue.add('sp-kept', { n: 3 }, { tx: sp })
        })
        // The key the rolled-back savepoint took is free again inside the transaction.
        const again = await queue.add('sp-inner', { n: 4 }, { tx, deduplication: { id: 'sp-inner' } })
        expect(again.outcome).toBe('added')
      })
      expect(await count('jobs', 'name', 'sp-outer')).toBe(1)
      expect(await count('jobs', 'name', 'sp-kept')).toBe(1)
      const inner = await db.pool.query(`select data from ${S()}.jobs where name = 'sp-inner'`)
      expect(inner.rows.map((r) => r.data)).toEqual([{ n: 4 }])
    })

    it('parameters: arrays, jsonb, large integers, unicode and a 1 MB payload arrive as pg sends them', async () => {
      const awkward = `quote " backslash \\ comma , braces {} NULL null 'single' ünïcödé 𝄞 日本語 ‮rtl\n\ttab`
      const data = {
        list: [1, 'two', null, [3, { four: 4 }]],
        nested: { a: { b: { c: [true, false] } } },
        big: Number.MAX_SAFE_INTEGER,
        negative: -Number.MAX_SAFE_INTEGER,
        bigText: '123456789012345678901234567890',
        float: 0.1 + 0.2,
        awkward,
      }
      const payload = { blob: 'ü'.repeat(510 * 1024) } // 1 MB of UTF-8, under pgonce's limit of 1 MiB
      const added = await harness.transaction(async (tx) => {
        const parent = await queue.add('enc-parent', data, { tx, jobId: `job ${awkward}`, priority: 2_000_000_000 })
        const big = await queue.add('enc-big', payload, { tx, deduplication: { id: `key ${awkward}`, ttl: 2 ** 38 } })
        const bulk = await queue.addBulk(
          [
            { name: 'enc-bulk', data, opts: { jobId: `bulk ${awkward}`, dependsOn: [parent.id], attempts: 7 } },
            { name: 'enc-bulk', data: payload, opts: { deduplication: { id: `bulk-key ${awkward}` }, delay: 2 ** 33 } },
            { name: 'enc-bulk', data: { plain: awkward }, opts: { backoff: { type: 'fixed', delay: 5 } } },
          ],
          { tx },
        )
        return { parent, big, bulk }
      })
      expect((await queue.getJob(added.parent.id))?.data).toEqual(data)
      expect((await queue.getJob(added.parent.id))?.jobId).toBe(`job ${awkward}`)
      expect((await queue.getJob(added.big.id))?.data).toEqual(payload)
      expect(await queue.getDeduplicationJobId(`key ${awkward}`)).toBe(added.big.id)
      expect(await queue.getDeduplicationJobId(`bulk-key ${awkward}`)).toBe(added.bulk[1]!.id)
      const [first, second, third] = await Promise.all(added.bulk.map((j) => queue.getJob(j.id)))
      expect(first).toMatchObject({ data, jobId: `bulk ${awkward}`, maxAttempts: 7, state: 'waiting-children' })
      expect(second?.data).toEqual(payload)
      expect(second?.state).toBe('delayed')
      expect(third).toMatchObject({ data: { plain: awkward }, backoff: { type: 'fixed', delay: 5 } })
    })

    it('dedup keys and jobIds decide inside the transaction as with pg', async () => {
      await harness.transaction(async (tx) => {
        const first = await queue.add('dd', { n: 1 }, { tx, deduplication: { id: 'dd-key' } })
        const dup = await queue.add('dd', { n: 2 }, { tx, deduplication: { id: 'dd-key' } })
        expect(dup).toMatchObject({ id: first.id, deduplicated: true, outcome: 'duplicate-key' })
        const byId = await queue.add('dd', { n: 3 }, { tx, jobId: 'dd-id' })
        const again = await queue.add('dd', { n: 4 }, { tx, jobId: 'dd-id' })
        expect(again).toMatchObject({ id: byId.id, outcome: 'duplicate-job-id' })
        const bulk = await queue.addBulk(
          [
            { name: 'dd', data: { n: 5 }, opts: { deduplication: { id: 'dd-key' } } },
            { name: 'dd', data: { n: 6 }, opts: { jobId: 'dd-id' } },
            { name: 'dd', data: { n: 7 }, opts: { deduplication: { id: 'dd-bulk' } } },
          ],
          { tx },
        )
        expect(bulk.map((j) => j.outcome)).toEqual(['duplicate-key', 'duplicate-job-id', 'added'])
        expect(bulk[0]!.id).toBe(first.id)
      })
      expect(await count('jobs', 'name', 'dd')).toBe(3)
    })

    it("rows come back as pg's: retryJob inside the transaction gives a Job with a string id and Dates", async () => {
      const job = await queue.add('retry', { n: 1 })
      await db.pool.query(`update ${S()}.jobs set state = 'failed', finished_at = now() where id = $1`, [job.id])
      const retried = await harness.transaction(async (tx) => queue.retryJob(job.id, { tx }))
      expect(retried.id).toBe(job.id)
      expect(retried.state).toBe('waiting')
      expect(retried.runAt).toBeInstanceOf(Date)
      expect(retried.createdAt.getTime()).toBe(job.createdAt.getTime())
      expect((await queue.getJob(job.id))?.state).toBe('waiting')
    })

    it('the named helper wraps the same transaction', async () => {
      await harness.transaction(async (tx) => {
        await queue.add('named', { n: 1 }, { tx: harness.wrap(tx), deduplication: { id: 'named' } })
      })
      expect(await count('dedup_keys', 'key', 'named')).toBe(1)
    })

    it('effects.record: the ledger row commits with the transaction, and only once', async () => {
      const effects = new Effects({ connectionString: db.url, schema: db.schema, poolSize: 1 })
      try {
        const firsts = await harness.transaction(async (tx) => [
          await effects.record(tx, 'effect-1'),
          await effects.record(tx, 'effect-1'),
        ])
        expect(firsts).toEqual([true, false])
        await expect(
          harness.transaction(async (tx) => {
            await effects.record(tx, 'effect-2')
            throw ROLL_BACK
          }),
        ).rejects.toBe(ROLL_BACK)
        const { rows } = await db.pool.query(`select effect_key as key from ${S()}.processed_effects order by 1`)
        expect(rows.map((r) => r.key)).toEqual(['effect-1'])
      } finally {
        await effects.close()
      }
    })

    for (const [setting, code] of [
      ['lock_timeout', '55P03'],
      ['statement_timeout', '57014'],
    ] as const) {
      it(`a ${setting}: the add throws QueryTimeoutError ${code} and aborts the transaction, whose commit keeps nothing`, async () => {
        // Another transaction holds the key's row: an add of the same key waits for it.
        const holder = await db.pool.connect()
        const key = `held-${setting}`
        try {
          await holder.query('begin')
          await queue.add('held', { n: 1 }, { tx: holder, deduplication: { id: key } })
          let timeout: unknown
          let after: unknown
          const ended = await harness
            .transaction(async (tx) => {
              await harness.exec(tx, `set local ${setting} = '200ms'`)
              await queue.add(`before-${setting}`, { n: 1 }, { tx })
              timeout = await queue.add('held', { n: 2 }, { tx, deduplication: { id: key } }).catch((e: unknown) => e)
              after = await harness.exec(tx, 'select 1').catch((e: unknown) => e)
              // Returning normally, as code that caught the error might.
            })
            .then(
              () => 'resolves' as const,
              (e: unknown) => (messageOf(e).includes('canceling statement') ? ('rejects' as const) : e),
            )
          expect(timeout).toBeInstanceOf(QueryTimeoutError)
          expect(timeout).toMatchObject({ code })
          expect(messageOf(after)).toMatch(/current transaction is aborted/)
          expect(ended).toBe(harness.afterAbort)
          expect(await count('jobs', 'name', `before-${setting}`)).toBe(0)
        } finally {
          await holder.query('rollback')
          holder.release()
        }
      })
    }
  })
}
