// The hand-off (migration 000008): a plain add into a queue whose worker sleeps with a free slot inserts the job active
// for that worker and the NOTIFY carries it, so the handler starts without a claim. Only the named LISTEN session takes
// it; a worker with no free slot gives it back; adds in a caller's transaction, into a paused queue, or too large for a
// NOTIFY are not handed off, nor is a delayed one; an add tries the listed workers in turn and leaves no advisory lock in
// its session; a hand-off whose NOTIFY is lost goes back when the worker's LISTEN session is replaced, or is rescued
// when its lease expires.

import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Queue, Worker } from '../src/index.js'
import { sqlFor } from '../src/db/sql-files.js'
import { exited, spawnFixture, storedJob, waitFor, waitForState } from './fixtures/worker-helpers.js'
import { type TestSchema, freshSchema } from './support/schema.js'

let db: TestSchema

beforeAll(async () => {
  db = await freshSchema('worker_hand_off')
  await db.pool.query(`create table "${db.schema}".handled (job_id bigint not null, pid int not null, attempt int not null)`)
})
afterAll(async () => {
  await db.drop()
})

const queueOf = (name: string) => new Queue(name, { connectionString: db.url, schema: db.schema, migrate: false })

/** Whether worker `id` holds its hand-off lock (it sleeps with a free slot: plain adds go straight to it). */
async function takesHandOffs(id: string): Promise<boolean> {
  const { rows } = await db.pool.query<{ held: boolean }>(
    `select exists (select 1 from pg_locks l where l.locktype = 'advisory' and l.granted and l.objsubid = 1
       and ((l.classid::bigint << 32) | l.objid::bigint) = "${db.schema}"._handoff_key($1)) as held`, [id])
  return rows[0]?.held === true
}

/** The listed workers of `queue` that hold their hand-off lock. */
async function takingHandOffs(queue: string): Promise<string[]> {
  const { rows } = await db.pool.query<{ worker_id: string }>(`select worker_id from "${db.schema}".worker_listeners w
    where w.queue = $1 and exists (select 1 from pg_locks l where l.locktype = 'advisory' and l.granted and l.objsubid = 1
       and ((l.classid::bigint << 32) | l.objid::bigint) = "${db.schema}"._handoff_key(w.worker_id))`, [queue])
  return rows.map((r) => r.worker_id)
}

/** A promise handlers wait on until `release()`. */
function gated(): { gate: Promise<void>; release: () => void } {
  let release!: () => void
  const gate = new Promise<void>((r) => (release = r))
  return { gate, release }
}

/** Terminates the worker's LISTEN backend and waits until it listens on a new session. */
async function replaceListener(worker: Worker): Promise<void> {
  const oldPid = worker.listenerPid
  await db.pool.query('select pg_terminate_backend($1)', [oldPid])
  await waitFor(() => worker.listenerPid !== null && worker.listenerPid !== oldPid, 10_000, 'a new LISTEN session')
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

describe('hand-off to a sleeping worker', () => {
  it('a plain add reaches an idle worker active, and its handler starts without a claim', async () => {
    const queue = queueOf('ho-basic')
    const ran: string[] = []
    const worker = new Worker('ho-basic', async (job) => {
      ran.push(job.id)
      return 'ok'
    }, { connectionString: db.url, schema: db.schema, migrate: false, concurrency: 2 })
    try {
      await worker.run()
      await waitFor(() => takesHandOffs(worker.id), 10_000, 'the worker to take hand-offs')
      const job = await queue.add('x', { n: 1 })
      // The answer is the row as inserted: already active for this worker, so no claim can take it; only the NOTIFY
      // that carries it can start its handler.
      expect(job.state).toBe('active')
      expect((await storedJob(db, job.id)).locked_by).toBe(worker.id)
      const done = await waitForState(db, job.id, 'completed', 10_000)
      expect(done).toMatchObject({ attempts: 1, result: 'ok' })
      expect(ran).toEqual([job.id])
    } finally {
      await worker.close()
      await queue.close()
    }
  })

  it('a hand-off that arrives while the worker\'s claim is in flight runs at once, not given back', async () => {
    // An idle worker claims once more right after it advertised, and that claim reserves its free slots until it
    // returns. Here it is slowed (this schema's _queue_paused(), which claims call and adds do not, sleeps 0.5 s for
    // this queue), so that the add's hand-off lands inside it: the job must run as handed off, started in the
    // transaction that inserted it, where a give-back and a later claim would start it later (the reservation counted
    // as taken gave such hand-offs back: 4 in 8 runs of the first test under CPU load).
    const paused = `"${db.schema}"._queue_paused(text)`
    const original = (await db.pool.query<{ def: string }>(`select pg_get_functiondef($1::regprocedure) as def`, [paused])).rows[0]!.def
    await db.pool.query(`create or replace function "${db.schema}"._queue_paused(p_queue text) returns boolean language plpgsql stable as $$
      begin
        if p_queue = 'ho-in-flight' then perform pg_sleep(0.5); end if;
        return coalesce((select s.paused from "${db.schema}".queue_settings s where s.queue = p_queue), false);
      end $$`)
    const queue = queueOf('ho-in-flight')
    const worker = new Worker('ho-in-flight', async () => 'ok', { connectionString: db.url, schema: db.schema, migrate: false, concurrency: 2 })
    try {
      await worker.run()
      await waitFor(() => takesHandOffs(worker.id), 20_000, 'the worker to take hand-offs')
      // The worker's claim (or the take-over after it), sleeping in this test's _queue_paused().
      const claimsInFlight = async () => (await db.pool.query(`select 1 from pg_stat_activity where state = 'active'
        and wait_event = 'PgSleep' and (query like '-- Claims up to%' or query like '-- An idle worker%')`)).rowCount
      await waitFor(async () => (await claimsInFlight()) === 1, 10_000, 'the claim after the worker advertised')
      const job = await queue.add('x', {})
      expect(job.state).toBe('active')
      expect(await claimsInFlight()).toBe(1)
      const done = await waitForState(db, job.id, 'completed', 20_000)
      expect(done.started_at).toEqual(done.created_at)
      expect(done).toMatchObject({ attempts: 1, locked_by: worker.id })
    } finally {
      await worker.close()
      await queue.close()
      await db.pool.query(original)
    }
  })

  it('a worker with no free slot gives a hand-off back, and each job still runs once, one at a time', async () => {
    const queue = queueOf('ho-full')
    const { gate, release } = gated()
    let running = 0
    let most = 0
    const ran: string[] = []
    const worker = new Worker('ho-full', async (job) => {
      running++
      most = Math.max(most, running)
      ran.push(job.id)
      if (ran.length === 1) await gate
      running--
    }, { connectionString: db.url, schema: db.schema, migrate: false, concurrency: 1 })
    try {
      await worker.run()
      await waitFor(() => takesHandOffs(worker.id), 10_000, 'the worker to take hand-offs')
      const first = await queue.add('x', {})
      expect(first.state).toBe('active')
      await waitFor(() => ran.length === 1, 10_000, 'the first handler')
      // Still asleep and holding its lock: the second add is handed to it too, and it has no slot for it.
      const second = await queue.add('x', {})
      expect(second.state).toBe('active')
      await waitFor(async () => (await storedJob(db, second.id)).state !== 'active', 10_000, 'the hand-off to be given back')
      expect((await storedJob(db, second.id)).attempts).toBe(0)
      expect(ran).toEqual([first.id])
      release()
      await waitForState(db, second.id, 'completed', 10_000)
      expect(ran).toEqual([first.id, second.id])
      expect(most).toBe(1)
      expect(await storedJob(db, second.id)).toMatchObject({ attempts: 1 })
    } finally {
      release()
      await worker.close()
      await queue.close()
    }
  })

  it('adds in a caller\'s transaction, into a paused queue, or too large for a NOTIFY are not handed off', async () => {
    const queue = queueOf('ho-not')
    const worker = new Worker('ho-not', async () => 'ok',
      { connectionString: db.url, schema: db.schema, migrate: false, pollIntervalMs: 60_000 })
    const client = await db.pool.connect()
    try {
      await worker.run()
      await waitFor(() => takesHandOffs(worker.id), 10_000, 'the worker to take hand-offs')
      await client.query('begin')
      const inTx = await queue.add('x', {}, { tx: client })
      await client.query('commit')
      expect(inTx.state).toBe('waiting')
      await waitForState(db, inTx.id, 'completed', 10_000)

      await waitFor(() => takesHandOffs(worker.id), 10_000, 'the worker to sleep again')
      const big = await queue.add('x', { blob: 'x'.repeat(4_000) })
      expect(big.state).toBe('waiting')
      await waitForState(db, big.id, 'completed', 10_000)

      await waitFor(() => takesHandOffs(worker.id), 10_000, 'the worker to sleep again')
      await queue.pause()
      const paused = await queue.add('x', {})
      expect(paused.state).toBe('waiting')
      await sleep(300)
      expect((await storedJob(db, paused.id)).state).toBe('waiting')
      await queue.resume()
      await waitForState(db, paused.id, 'completed', 10_000)
    } finally {
      client.release()
      await worker.close()
      await queue.close()
    }
  })

  it('only the named session takes a hand-off; one whose NOTIFY is lost is rescued when its lease expires', async () => {
    const queue = queueOf('ho-lost')
    // A session that lists itself and holds the locks as a sleeping worker would, and never reads its NOTIFYs.
    const ghost = new pg.Client({ connectionString: db.url, application_name: 'pgonce-listener ghost' })
    ghost.on('error', () => {})
    await ghost.connect()
    let worker: Worker | undefined
    // A worker of another queue of the schema hears every NOTIFY of the schema's channel, this one's included.
    const bystanderRan: string[] = []
    const bystander = new Worker('ho-lost-bystander', async (job) => void bystanderRan.push(job.id),
      { connectionString: db.url, schema: db.schema, migrate: false })
    try {
      await bystander.run()
      await waitFor(() => takesHandOffs(bystander.id), 10_000, 'the bystander to sleep')
      await ghost.query(sqlFor('register-listener', db.schema), ['ghost', 'ho-lost', 1_000])
      expect((await ghost.query(sqlFor('take-idle-slot', db.schema), ['ho-lost', 'ghost'])).rows).toEqual([{ slot: 0, handoffs: true }])
      const job = await queue.add('x', {})
      expect(job.state).toBe('active')
      const handed = await storedJob(db, job.id)
      expect(handed).toMatchObject({ locked_by: 'ghost', attempts: 1 })
      await sleep(200)
      expect(bystanderRan).toEqual([])
      expect(await storedJob(db, job.id)).toMatchObject({ state: 'active', locked_by: 'ghost' })
      let startedAt: Date | undefined
      worker = new Worker('ho-lost', async () => {
        startedAt ??= (await db.pool.query<{ now: Date }>('select clock_timestamp() as now')).rows[0]!.now
        return 'rescued'
      }, { connectionString: db.url, schema: db.schema, migrate: false, maintenanceIntervalMs: 200, pollIntervalMs: 200 })
      await worker.run()
      await db.pool.query('select pg_terminate_backend($1)', [(ghost as unknown as { processID: number }).processID])
      const done = await waitForState(db, job.id, 'completed', 20_000)
      expect(done).toMatchObject({ result: 'rescued', attempts: 2 })
      expect(done.last_error).toMatch(/lease expired: worker ghost/)
      expect(startedAt!.getTime()).toBeGreaterThanOrEqual(handed.locked_until!.getTime())
      // The next worker of the queue to connect forgets the dead session.
      const other = new Worker('ho-lost', async () => {}, { connectionString: db.url, schema: db.schema, migrate: false })
      await other.run()
      await other.close()
      const { rows } = await db.pool.query(`select worker_id from "${db.schema}".worker_listeners where queue = 'ho-lost'`)
      expect(rows).toEqual([{ worker_id: worker.id }])
    } finally {
      await worker?.close()
      await bystander.close()
      await ghost.end().catch(() => {})
      await queue.close()
    }
  }, 40_000)

  it('after its LISTEN session is replaced, a worker takes hand-offs on the new one', async () => {
    const queue = queueOf('ho-reconnect')
    const worker = new Worker('ho-reconnect', async () => 'ok',
      { connectionString: db.url, schema: db.schema, migrate: false, pollIntervalMs: 60_000 })
    try {
      await worker.run()
      await waitFor(() => takesHandOffs(worker.id), 10_000, 'the worker to take hand-offs')
      await replaceListener(worker)
      await waitFor(() => takesHandOffs(worker.id), 10_000, 'the worker to take hand-offs again')
      const { rows } = await db.pool.query(`select backend_pid from "${db.schema}".worker_listeners where worker_id = $1`, [worker.id])
      expect(rows).toEqual([{ backend_pid: worker.listenerPid }])
      const job = await queue.add('x', {})
      expect(job.state).toBe('active')
      await waitForState(db, job.id, 'completed', 10_000)
    } finally {
      await worker.close()
      await queue.close()
    }
  })

  it('after a LISTEN session is lost, the hand-offs sent to it go back at once; the one running stays and runs once', async () => {
    const queue = queueOf('ho-lost-session')
    const { gate, release } = gated()
    const runs = new Map<string, number>()
    const worker = new Worker('ho-lost-session', async (job) => {
      runs.set(job.id, (runs.get(job.id) ?? 0) + 1)
      if ((job.data as { hold?: boolean }).hold === true) await gate
      return 'ok'
    }, { connectionString: db.url, schema: db.schema, migrate: false, concurrency: 4, pollIntervalMs: 60_000 })
    try {
      await worker.run()
      await waitFor(() => takesHandOffs(worker.id), 10_000, 'the worker to take hand-offs')
      const running = await queue.add('x', { hold: true })
      expect(running.state).toBe('active')
      await waitFor(() => runs.get(running.id) === 1, 10_000, 'the held handler')
      // What an add leaves when the NOTIFY to this worker's session is lost: a row started in the transaction that
      // inserted it, active for this worker under a long lease, that the worker never heard of.
      const { rows: [lost] } = await db.pool.query<{ id: string }>(`insert into "${db.schema}".jobs
          (queue, name, data, state, attempts, lock_token, locked_until, locked_by, started_at)
        values ('ho-lost-session', 'x', '{}', 'active', 1, gen_random_uuid(), now() + interval '1 hour', $1, now())
        returning id`, [worker.id])
      await replaceListener(worker)
      // Given back at once (run not counted), claimed and run: long before its hour-long lease.
      const done = await waitForState(db, lost!.id, 'completed', 10_000)
      expect(done).toMatchObject({ attempts: 1, result: 'ok' })
      expect(await storedJob(db, running.id)).toMatchObject({ state: 'active', attempts: 1 })
      release()
      await waitForState(db, running.id, 'completed', 10_000)
      expect(runs.get(running.id)).toBe(1)
      expect(runs.get(lost!.id)).toBe(1)
      // And the new session takes hand-offs.
      await waitFor(() => takesHandOffs(worker.id), 10_000, 'the worker to take hand-offs again')
      expect((await queue.add('x', {})).state).toBe('active')
    } finally {
      release()
      await worker.close()
      await queue.close()
    }
  })

  it('a closing worker takes no hand-off, and one killed takes none either', async () => {
    const queue = queueOf('ho-close')
    const { gate, release } = gated()
    const worker = new Worker('ho-close', async () => gate,
      { connectionString: db.url, schema: db.schema, migrate: false, concurrency: 2, closeTimeoutMs: 10_000 })
    try {
      await worker.run()
      await waitFor(() => takesHandOffs(worker.id), 10_000, 'the worker to take hand-offs')
      const running = await queue.add('x', {})
      expect(running.state).toBe('active')
      await waitFor(async () => (await storedJob(db, running.id)).started_at !== null, 10_000, 'the handler')
      const closing = worker.close()
      await waitFor(async () => !(await takesHandOffs(worker.id)), 10_000, 'the closing worker to stop taking hand-offs')
      const later = await queue.add('x', {})
      expect(later.state).toBe('waiting')
      release()
      await closing
      expect(await storedJob(db, later.id)).toMatchObject({ state: 'waiting', attempts: 0 })
      expect((await db.pool.query(`select 1 from "${db.schema}".worker_listeners where worker_id = $1`, [worker.id])).rows).toEqual([])

      const child = spawnFixture('worker-child.ts', { PGONCE_URL: db.url, PGONCE_SCHEMA: db.schema, QUEUE: 'ho-close', MODE: 'hang-first', LEASE_MS: '1500', MAINTENANCE_MS: '0' })
      try {
        await waitForState(db, later.id, 'active', 60_000)
        // The child runs `later` (it hangs) and sleeps with free slots: it takes hand-offs until it is killed.
        await waitFor(async () => (await takingHandOffs('ho-close')).length === 1, 10_000, 'the child to take hand-offs')
        child.kill('SIGKILL')
        expect(await exited(child)).toBe('SIGKILL')
        // Its locks go with its connections once their backends have seen them close (a moment after the kill: a job
        // handed off within that moment is left to the lease rescue, docs/workers.md). Then an add is not handed to it.
        await waitFor(async () => (await takingHandOffs('ho-close')).length === 0, 10_000, 'the killed worker\'s backends to end')
        const afterKill = await queue.add('x', {})
        expect(afterKill.state).toBe('waiting')
      } finally {
        child.kill('SIGKILL')
      }
    } finally {
      release()
      await worker.close()
      await queue.close()
    }
  }, 90_000)

  it('an add tries the listed workers in turn, leaves no lock in its session, and hands off no delayed job', async () => {
    // Two listed workers of one queue on a session that holds an idle slot (so adds probe the hand-off): w1 is busy
    // (no hand-off lock), w2 sleeps (holds it). The add's try-lock on w1's key succeeds and must be released again.
    const sleeper = new pg.Client({ connectionString: db.url })
    const pool = new pg.Pool({ connectionString: db.url, max: 1 })
    pool.on('error', () => {})
    const queue = new Queue('ho-probe', { pool, schema: db.schema, migrate: false })
    await sleeper.connect()
    try {
      await sleeper.query(`select pg_advisory_lock("${db.schema}"._idle_slot_key('ho-probe', 0))`)
      await sleeper.query(`insert into "${db.schema}".worker_listeners (worker_id, queue, backend_pid, lease_ms)
        values ('ho-probe-w1', 'ho-probe', pg_backend_pid(), 30000), ('ho-probe-w2', 'ho-probe', pg_backend_pid(), 30000)`)
      const advisoryLocks = async () => (await pool.query<{ n: number }>(
        `select count(*)::int as n from pg_locks where locktype = 'advisory' and pid = pg_backend_pid()`)).rows[0]?.n
      const none = await queue.add('x', {})
      expect(none.state).toBe('waiting')
      expect(await advisoryLocks()).toBe(0)

      await sleeper.query(`select pg_advisory_lock("${db.schema}"._handoff_key('ho-probe-w2'))`)
      const handed = await queue.add('x', {})
      expect(handed.state).toBe('active')
      expect((await storedJob(db, handed.id)).locked_by).toBe('ho-probe-w2')
      expect(await advisoryLocks()).toBe(0)

      const delayed = await queue.add('x', {}, { delay: 60_000 })
      expect(delayed.state).toBe('delayed')
      expect((await storedJob(db, delayed.id)).locked_by).toBeNull()
    } finally {
      await sleeper.end()
      await queue.close()
      await pool.end()
    }
  })
})
