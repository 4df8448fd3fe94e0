// The dedup tests' fixture: a fresh schema with one Queue, and SQL reads and by-hand edits of its keys and jobs.

import { Queue, type QueueOptions } from '../../src/index.js'
import { type TestSchema, freshSchema } from './schema.js'

export type JobState = 'waiting' | 'delayed' | 'waiting-children' | 'active' | 'completed' | 'failed'

export interface KeyRow {
  job_id: string
  expires_at: Date | null
}

export interface KeyedJob<Data> {
  id: string
  state: JobState
  data: Data
}

export class DedupTables<Data = unknown> {
  constructor(
    private readonly db: TestSchema,
    readonly queue: string,
  ) {}

  /** Runs SQL on the test pool; `$S` stands for the quoted test schema. */
  async sql<R extends object>(text: string, values: unknown[] = []): Promise<R[]> {
    return (await this.db.pool.query(text.replaceAll('$S', `"${this.db.schema}"`), values)).rows as R[]
  }

  /** The key's row (owner and expiry), undefined if there is none. */
  async key(key: string, queue = this.queue): Promise<KeyRow | undefined> {
    const [row] = await this.sql<KeyRow>('select job_id, expires_at from $S.dedup_keys where queue = $1 and key = $2', [
      queue,
      key,
    ])
    return row
  }

  async keyOwner(key: string): Promise<string | undefined> {
    return (await this.key(key))?.job_id
  }

  /** Milliseconds until the key expires, by the database clock (null: no TTL). */
  async msLeft(key: string): Promise<number | null | undefined> {
    const [row] = await this.sql<{ ms: number | null }>(
      'select (extract(epoch from expires_at - now()) * 1000)::float8 as ms from $S.dedup_keys where queue = $1 and key = $2',
      [this.queue, key],
    )
    return row?.ms
  }

  /** Every job of the queue added with this key, oldest first. */
  async jobsWithKey(key: string): Promise<KeyedJob<Data>[]> {
    return this.sql('select id, state, data from $S.jobs where queue = $1 and dedup_key = $2 order by id', [
      this.queue,
      key,
    ])
  }

  /** Backdates the key so that it expired a second ago. */
  async expire(key: string): Promise<void> {
    await this.sql(`update $S.dedup_keys set expires_at = now() - interval '1 second' where queue = $1 and key = $2`, [
      this.queue,
      key,
    ])
  }

  /** What a worker's claim does to the row (active, leased, one attempt started); returns the lock token. */
  async makeActive(id: string): Promise<string> {
    const [row] = await this.sql<{ lock_token: string }>(
      `update $S.jobs set state = 'active', lock_token = gen_random_uuid(), locked_until = now() + interval '5 minutes',
         attempts = attempts + 1, started_at = now() where id = $1 returning lock_token`,
      [id],
    )
    return (row as { lock_token: string }).lock_token
  }

  /** Finishes the job by hand, without touching its key. */
  async makeTerminal(id: string, state: 'completed' | 'failed'): Promise<void> {
    await this.sql(
      `update $S.jobs set state = $2, finished_at = now(), lock_token = null, locked_until = null where id = $1`,
      [id, state],
    )
  }

  /** Deletes the job row by hand, leaving its key an orphan. */
  async deleteJob(id: string): Promise<void> {
    await this.sql('delete from $S.jobs where id = $1', [id])
  }
}

export interface DedupSuite<Data> {
  db: TestSchema
  queue: Queue<Data>
  t: DedupTables<Data>
}

/** For beforeAll: a fresh migrated schema, a Queue named `queueName` on it, and its tables. */
export async function openDedupSuite<Data>(
  label: string,
  queueName: string,
  options: Omit<QueueOptions, 'connectionString' | 'pool' | 'schema'> = {},
): Promise<DedupSuite<Data>> {
  const db = await freshSchema(label)
  const queue = new Queue<Data>(queueName, { connectionString: db.url, schema: db.schema, ...options })
  return { db, queue, t: new DedupTables<Data>(db, queueName) }
}

/** For afterAll: closes the Queue and drops the schema (either may be missing if beforeAll failed). */
export async function closeDedupSuite(suite: { db?: TestSchema; queue?: { close(): Promise<void> } }): Promise<void> {
  await suite.queue?.close()
  await suite.db?.drop()
}
