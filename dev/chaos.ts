// npm run chaos: pgonce under random faults, then a Jepsen-style check of what it promised.
//
// Producers add jobs over a small key space (many duplicates: jobIds, dedup keys with and without a TTL, replace,
// batches) while 3 worker processes run handlers that make two ctx.effects each (each effect inserts a row into this
// run's chaos_effects table, in the effect's own transaction). Meanwhile the harness SIGKILLs workers (and restarts
// them), freezes them (SIGSTOP, sometimes past their lease, then SIGCONT) and terminates random backends of pgonce's
// (pg_terminate_backend on the workers' pools and listeners and the producers' pool). At the end: faults stop, the
// queue drains, the workers get SIGTERM, and the run is checked from the database:
//   lost        acknowledged adds not accounted for (no job with that id, and none now standing for its jobId or
//               key), plus completed jobs missing one of their effects
//   duplicated  effect keys applied more than once (rows counted per key)
//   crashed     worker processes that exited on their own or with an unhandled error, or not cleanly on SIGTERM
//   exceeded    flow control (docs/flow-control.md): a second queue, chaos-limited, has concurrency 2, a rate limit
//               of 30 starts per second, and its jobs in 20 groups of concurrency 1; each of its runs whose
//               completion committed records, in the completion's transaction (ctx.transaction), its group, its claim
//               time and its handler's start and end on the database clock. Counted: instants where more than 2 of
//               those runs overlap, or more than 1 of one group, windows of 1 s holding more than 30 claims, and slots
//               (queue-wide or a group's) still held once everything drained (a leak). A run whose worker was killed or lost its
//               lease records nothing: its slot was held until its lease ended, which only leaves the others less room.
// The last line is exactly `lost=N duplicated=N crashed=N exceeded=N`; the exit code is 1 if any is non-zero.
//
//   CHAOS_SECONDS=30 npm run chaos      (default 120; DATABASE_URL, else postgres://postgres@127.0.0.1:5432/test;
//                                        CHAOS_DEBUG=1 names the emitter of an unhandled error event in a worker)
//   CHAOS_REDIS=1 npm run chaos         the same with the Redis layer on, removals by a process without redis and by
//                                        SQL, and frozen cache listeners (dev/chaos-redis.ts; REDIS_URL)
//   npm run chaos -- --netns             the workers in network namespaces of the test bed (dev/netns/bed.ts, root
//                                        only), each behind its latency proxy (CHAOS_RTT ms, default 2, jitter 0.5),
//                                        against the bed's own PostgreSQL; one more fault: a host's cable cut for up
//                                        to 3 leases, then back
//
// A fresh schema (chaos_<random>) is used and dropped at the end, also on Ctrl-C.

import { type ChildProcess, spawn } from 'node:child_process'
import { randomBytes, randomInt } from 'node:crypto'
import { fileURLToPath } from 'node:url'
import pg from 'pg'
import { Queue, Worker, migrate } from '../src/index.js'
import { Bed } from './netns/bed.js'
import {
  CHAOS_REDIS,
  REDIS_URL,
  Remover,
  type ReAddStats,
  cacheListenerPattern,
  continueBackend,
  deleteRedisKeys,
  freezeCacheListener,
  frozenBackends,
  reAdd,
  runRemover,
} from './chaos-redis.js'

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms))
const withApp = (url: string, name: string): string =>
  `${url}${url.includes('?') ? '&' : '?'}application_name=${encodeURIComponent(name)}`

const LEASE_MS = 1_500
/** The limits of the queue chaos-limited. */
const LIMITED = { concurrency: 2, rateLimit: { max: 30, durationMs: 1_000 }, group: { concurrency: 1 } }
/** How many groups the jobs of chaos-limited are spread over. */
const LIMITED_GROUPS = 20
const NETNS = process.argv.includes('--netns')

if (process.env.CHAOS_ROLE !== undefined) exitWithTheHarness()
if (process.env.CHAOS_ROLE === 'worker') await runWorker()
else if (process.env.CHAOS_ROLE === 'remover') await runRemover()
else await runHarness()

// ---------------------------------------------------------------------------------------------------------------
// A worker process.

async function runWorker(): Promise<void> {
  const crash = (kind: string) => (err: unknown) => {
    process.stderr.write(`CRASH ${kind}: ${(err as Error)?.stack ?? String(err)}\n`)
    process.exit(70)
  }
  // CHAOS_DEBUG=1: before an 'error' event nobody listens to becomes an uncaught exception, say which emitter it was
  // (a pg Client's application_name, pid, pool use and state), and print a crashed worker's whole stderr.
  if (process.env.CHAOS_DEBUG) {
    const { EventEmitter } = await import('node:events')
    const emit = EventEmitter.prototype.emit
    EventEmitter.prototype.emit = function (
      this: InstanceType<typeof EventEmitter>,
      name: string | symbol,
      ...args: unknown[]
    ) {
      if (name === 'error' && this.listenerCount('error') === 0) {
        const c = this as unknown as Record<string, unknown> & { connectionParameters?: { application_name?: string } }
        process.stderr.write(
          `DEBUG unhandled 'error' on ${this.constructor.name}: ${JSON.stringify({ app: c.connectionParameters?.application_name, pid: c.processID, uses: c._poolUseCount, queryable: c._queryable, ending: c._ending, connecting: c._connecting, connected: c._connected })}\n${new Error('at').stack}\n`,
        )
      }
      return emit.call(this, name, ...args)
    } as typeof emit
  }
  process.on('uncaughtException', crash('uncaughtException'))
  process.on('unhandledRejection', crash('unhandledRejection'))
  const url = process.env.CHAOS_URL as string
  const schema = process.env.CHAOS_SCHEMA as string
  const worker = new Worker<Record<string, unknown>>(
    'chaos',
    async (job, ctx) => {
      const effect = (n: number) =>
        ctx.effect(`${job.id}:${n}`, async (tx) => {
          await tx.query(`insert into "${schema}".chaos_effects (effect_key, job_id, pid) values ($1, $2, $3)`, [
            `${job.id}:${n}`,
            job.id,
            process.pid,
          ])
        })
      await effect(1)
      await sleep(randomInt(0, 40))
      await effect(2)
      await sleep(randomInt(0, 10))
      return { by: process.pid }
    },
    {
      connectionString: url,
      schema,
      concurrency: 4,
      leaseMs: LEASE_MS,
      heartbeatMs: 400,
      pollIntervalMs: 300,
      maintenanceIntervalMs: 500,
      migrate: false,
      ...(CHAOS_REDIS ? { redis: REDIS_URL } : {}),
    },
  )
  // The handler's start on the database clock (ctx.transaction would complete the job).
  const clock = new pg.Pool({ connectionString: url, max: 2 })
  clock.on('error', () => {})
  const limited = new Worker<Record<string, unknown>>(
    'chaos-limited',
    async (job, ctx) => {
      const { rows } = await clock.query('select clock_timestamp() as at')
      await sleep(randomInt(0, 30))
      await ctx.transaction(async (tx) => {
        await tx.query(
          `insert into "${schema}".chaos_runs (job_id, group_id, claimed_at, started_at, ended_at)
           select $1, j.group_id, j.started_at, $2, clock_timestamp() from "${schema}".jobs j where j.id = $1`,
          [job.id, (rows[0] as { at: Date }).at],
        )
      })
    },
    {
      connectionString: url,
      schema,
      concurrency: 2,
      leaseMs: LEASE_MS,
      heartbeatMs: 400,
      pollIntervalMs: 300,
      maintenanceIntervalMs: 500,
      migrate: false,
    },
  )
  let errors = 0
  worker.on('error', () => errors++)
  limited.on('error', () => errors++)
  process.once('SIGTERM', () => {
    void Promise.all([worker.close(), limited.close()]).then(() => {
      process.stderr.write(`worker ${process.pid}: closed (${errors} errors reported)\n`)
      process.exit(0)
    })
  })
  await Promise.all([worker.run(), limited.run()])
  process.stdout.write('ready\n')
}

/**
 * A child of the harness leaves when the harness is gone (killed, or `npm run chaos | head` ended by SIGPIPE): it is
 * re-parented then, and would otherwise run on against a schema nobody checks or drops.
 */
function exitWithTheHarness(): void {
  const harness = process.ppid
  setInterval(() => {
    if (process.ppid !== harness) process.exit(1)
  }, 1_000).unref()
}

// ---------------------------------------------------------------------------------------------------------------
// The harness.

interface Ack {
  id: string
  jobId: string | null
  key: string | null
}

interface Slot {
  child: ChildProcess
  /** Set just before the harness kills it (SIGKILL now, SIGTERM at the end). */
  killedBy: 'SIGKILL' | 'SIGTERM' | null
  stopped: boolean
  /** It printed 'ready': its SIGTERM handler is installed (before that, SIGTERM's default action kills it). */
  ready: boolean
  stderr: string
}

async function runHarness(): Promise<void> {
  const seconds = Number(process.env.CHAOS_SECONDS ?? 120)
  const bed = NETNS ? await Bed.create({ hosts: 3 }) : null
  for (const h of bed?.hosts ?? []) h.proxy.roundTrip(Number(process.env.CHAOS_RTT ?? 2), 0.5)
  const url = bed?.url ?? process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
  const run = randomBytes(4).toString('hex')
  const schema = `chaos_${run}`
  const workerApp = `chaos-${run}-w`
  const producerApp = `chaos-${run}-p`
  const log = (msg: string) => process.stdout.write(`${msg}\n`)

  await migrate({ connectionString: url, schema })
  const pool = new pg.Pool({ connectionString: withApp(url, `chaos-${run}-harness`), max: 3 })
  pool.on('error', () => {})
  await pool.query(`create table "${schema}".chaos_effects (effect_key text not null, job_id bigint not null, pid int not null,
    at timestamptz not null default clock_timestamp())`)
  await pool.query(`create table "${schema}".chaos_runs (job_id bigint not null, group_id text, claimed_at timestamptz not null,
    started_at timestamptz not null, ended_at timestamptz not null)`)

  const crashes: string[] = []
  const slots: Slot[] = []
  const file = fileURLToPath(import.meta.url)
  let started = 0
  /** A worker process; with --netns in the next host's namespace (round robin), through that host's proxy. */
  const start = (): Slot => {
    const host = bed?.hosts[started++ % bed.hosts.length]
    const env = { CHAOS_ROLE: 'worker', CHAOS_URL: withApp(host?.url ?? url, workerApp), CHAOS_SCHEMA: schema }
    const child =
      bed === null || host === undefined
        ? spawn(process.execPath, ['--import', 'tsx', file], {
            env: { ...process.env, ...env },
            stdio: ['ignore', 'pipe', 'pipe'],
          })
        : bed.spawn(host, [process.execPath, '--import', 'tsx', file], env)
    const slot: Slot = { child, killedBy: null, stopped: false, ready: false, stderr: '' }
    child.stdout?.on('data', (c: Buffer) => {
      if (c.toString().includes('ready')) slot.ready = true
    })
    child.stderr?.on('data', (c: Buffer) => (slot.stderr = (slot.stderr + c.toString()).slice(-4_000)))
    child.on('exit', (code, signal) => {
      const expected =
        (slot.killedBy === 'SIGKILL' && signal === 'SIGKILL') || (slot.killedBy === 'SIGTERM' && code === 0)
      if (!expected)
        crashes.push(
          `worker ${child.pid} exited (code ${code}, signal ${signal}) ${process.env.CHAOS_DEBUG ? slot.stderr : slot.stderr.trim().split('\n').slice(-3).join(' | ')}`,
        )
    })
    return slot
  }
  for (let i = 0; i < 3; i++) slots.push(start())

  const queue = new Queue('chaos', {
    connectionString: withApp(url, producerApp),
    schema,
    migrate: false,
    poolSize: 6,
    ...(CHAOS_REDIS ? { redis: REDIS_URL } : {}),
  })
  const limitedQueue = new Queue('chaos-limited', {
    connectionString: withApp(url, producerApp),
    schema,
    migrate: false,
    poolSize: 2,
  })
  const remover = CHAOS_REDIS
    ? new Remover(file, { ...process.env, CHAOS_URL: withApp(url, producerApp), CHAOS_SCHEMA: schema })
    : null
  let cleaned = false
  const cleanup = async (): Promise<void> => {
    if (cleaned) return
    cleaned = true
    for (const pid of [...frozenBackends]) continueBackend(pid)
    await remover?.stop()
    for (const s of slots) {
      if (s.child.exitCode === null && s.child.signalCode === null) {
        s.killedBy = 'SIGKILL'
        s.child.kill('SIGKILL')
      }
    }
    await queue.close().catch(() => {})
    await limitedQueue.close().catch(() => {})
    if (CHAOS_REDIS) await deleteRedisKeys(schema).catch(() => {})
    await pool.query(`drop schema if exists "${schema}" cascade`).catch(() => {})
    await pool.end().catch(() => {})
    await bed?.destroy()
  }
  process.once('SIGINT', () => void cleanup().then(() => process.exit(130)))

  try {
    // -- load --------------------------------------------------------------------------------------------------
    const acks: Ack[] = []
    let refused = 0
    let producing = true
    const item = (): {
      name: string
      data: unknown
      opts: Record<string, unknown>
      jobId: string | null
      key: string | null
    } => {
      const r = randomInt(100)
      const base = { name: 'c', data: { r: randomInt(1e6) } }
      if (r < 30) {
        const jobId = `${run}-j${randomInt(30)}`
        return { ...base, opts: { jobId, attempts: 100 }, jobId, key: null }
      }
      if (r < 55) {
        const key = `k${randomInt(30)}`
        return { ...base, opts: { deduplication: { id: key }, attempts: 100 }, jobId: null, key }
      }
      if (r < 67) {
        const key = `t${randomInt(20)}`
        return { ...base, opts: { deduplication: { id: key, ttl: 3_000 }, attempts: 100 }, jobId: null, key }
      }
      if (r < 80) {
        const key = `r${randomInt(10)}`
        return { ...base, opts: { deduplication: { id: key, replace: true }, attempts: 100 }, jobId: null, key }
      }
      return { ...base, opts: { attempts: 100 }, jobId: null, key: null }
    }
    await limitedQueue.setLimits(LIMITED)
    const limitedAcks: string[] = []
    const producer = async (): Promise<void> => {
      while (producing) {
        try {
          if (randomInt(100) < 8) {
            const group = { id: `g${randomInt(LIMITED_GROUPS)}` }
            limitedAcks.push((await limitedQueue.add('l', { r: randomInt(1e6) }, { attempts: 100, group })).id)
          } else if (randomInt(100) < 20) {
            const items = Array.from({ length: 4 }, item)
            const jobs = await queue.addBulk(items.map(({ name, data, opts }) => ({ name, data, opts })))
            jobs.forEach((j, i) => acks.push({ id: j.id, jobId: items[i]!.jobId, key: items[i]!.key }))
          } else {
            const it = item()
            const job = await queue.add(it.name, it.data, it.opts)
            acks.push({ id: job.id, jobId: it.jobId, key: it.key })
          }
        } catch {
          refused++
          await sleep(20)
        }
        await sleep(randomInt(10, 40))
      }
    }
    const producers = Array.from({ length: 4 }, producer)
    const reAdding: Promise<ReAddStats | null> =
      remover === null
        ? Promise.resolve(null)
        : reAdd({ queue, pool, schema, remover, lanes: 2, acks, running: () => producing })

    // -- faults ------------------------------------------------------------------------------------------------
    const faults = { kill: 0, freeze: 0, terminate: 0, 'listener stall': 0, cut: 0 }
    const live = () =>
      slots.filter((s) => s.killedBy === null && s.child.exitCode === null && s.child.signalCode === null)
    const pending: Promise<void>[] = []
    const until = Date.now() + seconds * 1000
    log(
      `chaos: schema ${schema}, ${seconds} s, 3 workers${CHAOS_REDIS ? `, Redis at ${REDIS_URL}` : ''}` +
        (bed === null ? '' : `, in namespaces of bed ${bed.index} behind ${process.env.CHAOS_RTT ?? 2} ms RTT`),
    )
    while (Date.now() < until) {
      await sleep(randomInt(500, 1_300))
      const r = randomInt(100)
      const running = live().filter((s) => !s.stopped)
      if (r < 25 && running.length > 0) {
        const s = running[randomInt(running.length)]!
        s.killedBy = 'SIGKILL'
        s.child.kill('SIGKILL')
        faults.kill++
        pending.push(sleep(randomInt(200, 800)).then(() => void slots.splice(slots.indexOf(s), 1, start())))
      } else if (CHAOS_REDIS && r < 40) {
        // A cache listener whose session stops delivering without closing.
        pending.push(
          freezeCacheListener(pool, schema).then((frozen) => {
            if (frozen) faults['listener stall']++
          }),
        )
      } else if (bed !== null && r < 35) {
        // A host's cable cut (its workers' connections hear nothing), then back before or after their leases ran out.
        const host = bed.hosts[randomInt(bed.hosts.length)]!
        bed.cut(host)
        faults.cut++
        pending.push(sleep(randomInt(300, 3 * LEASE_MS)).then(() => bed.heal(host)))
      } else if (r < 50 && running.length > 0) {
        const s = running[randomInt(running.length)]!
        s.stopped = true
        s.child.kill('SIGSTOP')
        faults.freeze++
        pending.push(
          sleep(randomInt(300, 3 * LEASE_MS)).then(() => {
            s.child.kill('SIGCONT')
            s.stopped = false
          }),
        )
      } else {
        const pids = live().map((s) => s.child.pid)
        const { rows } = await pool
          .query<{ pid: number }>(
            `select pid from pg_stat_activity where datname = current_database() and (application_name = any($1)
             or (application_name like 'pgonce-listener %' and substring(application_name from ':(\\d+):(?:[0-9a-f]+|shared)$')::int = any($2))
             or application_name like $3)`,
            [[workerApp, producerApp], pids, CHAOS_REDIS ? cacheListenerPattern(schema) : null],
          )
          .catch(() => ({ rows: [] as { pid: number }[] }))
        for (let n = randomInt(1, 4); n > 0 && rows.length > 0; n--) {
          const [victim] = rows.splice(randomInt(rows.length), 1)
          await pool.query('select pg_terminate_backend($1)', [victim!.pid]).catch(() => {})
          faults.terminate++
        }
      }
    }
    await Promise.all(pending)
    for (const s of slots) if (s.stopped) s.child.kill('SIGCONT')
    producing = false
    await Promise.all(producers)
    const reAdds = await reAdding
    log(
      `faults: ${faults.kill} SIGKILLs, ${faults.freeze} freezes, ${faults.terminate} backends terminated` +
        (bed === null ? '' : `, ${faults.cut} cables cut`) +
        (CHAOS_REDIS ? `, ${faults['listener stall']} cache listener stalls` : ''),
    )
    log(
      `adds: ${acks.length} acknowledged (and ${limitedAcks.length} to chaos-limited), ${refused} refused (errors the callers saw)`,
    )
    if (reAdds !== null) {
      log(
        `re-adds after a removal: ${JSON.stringify(reAdds.checked)} checked, ${reAdds.faulted} given up on a fault, ` +
          `${reAdds.stale} answered by the removed key's owner; the producers' cache: ${JSON.stringify(queue.cacheOutcomes.snapshot())}`,
      )
    }

    // -- drain -------------------------------------------------------------------------------------------------
    const drainUntil = Date.now() + 90_000
    let left = -1
    while (Date.now() < drainUntil) {
      const { rows } = await pool.query<{ n: number }>(
        `select count(*)::int as n from "${schema}".jobs where state in ('waiting', 'delayed', 'active')`,
      )
      left = rows[0]!.n
      if (left === 0) break
      await sleep(250)
    }
    log(left === 0 ? 'drained' : `not drained after 90 s: ${left} jobs still live`)
    // A worker restarted moments ago may still be loading: SIGTERM before its handler is installed would kill it
    // (exit by signal, counted as a crash of pgonce's). Wait until each has said it is ready.
    const readyBy = Date.now() + 20_000
    while (live().some((s) => !s.ready) && Date.now() < readyBy) await sleep(50)
    for (const s of live()) {
      s.killedBy = 'SIGTERM'
      s.child.kill('SIGTERM')
    }
    await Promise.all(
      slots.map((s) =>
        s.child.exitCode !== null || s.child.signalCode !== null
          ? Promise.resolve()
          : Promise.race([
              new Promise((r) => s.child.once('exit', r)),
              sleep(20_000).then(() => {
                crashes.push(`worker ${s.child.pid} did not exit within 20 s of SIGTERM`)
                s.killedBy = 'SIGKILL'
                s.child.kill('SIGKILL')
              }),
            ]),
      ),
    )

    // -- check -------------------------------------------------------------------------------------------------
    const {
      rows: [unaccounted],
    } = await pool.query<{ n: number; sample: string | null }>(
      `select count(*)::int as n, string_agg(a.id::text, ',') filter (where true) as sample
       from unnest($1::bigint[], $2::text[], $3::text[]) a(id, job_id, key)
       where not exists (select 1 from "${schema}".jobs j where j.id = a.id)
         and not (a.job_id is not null and exists (select 1 from "${schema}".jobs j where j.job_id = a.job_id))
         and not (a.key is not null and exists (select 1 from "${schema}".jobs j where j.queue = 'chaos' and j.dedup_key = a.key))`,
      [acks.map((a) => a.id), acks.map((a) => a.jobId), acks.map((a) => a.key)],
    )
    const {
      rows: [missing],
    } = await pool.query<{ n: number }>(
      `select count(*)::int as n from "${schema}".jobs j cross join generate_series(1, 2) e(n)
       where j.queue = 'chaos' and j.state = 'completed'
         and not exists (select 1 from "${schema}".chaos_effects c where c.effect_key = j.id || ':' || e.n)`,
    )
    const {
      rows: [dup],
    } = await pool.query<{ n: number; sample: string | null }>(
      `select count(*)::int as n, string_agg(effect_key, ',') as sample from (
         select effect_key from "${schema}".chaos_effects group by 1 having count(*) > 1) d`,
    )
    const {
      rows: [tally],
    } = await pool.query<{ jobs: number; completed: number; failed: number; effects: number; ledger: number }>(
      `select (select count(*)::int from "${schema}".jobs where queue = 'chaos') as jobs,
              (select count(*)::int from "${schema}".jobs where queue = 'chaos' and state = 'completed') as completed,
              (select count(*)::int from "${schema}".jobs where queue = 'chaos' and state = 'failed') as failed,
              (select count(*)::int from "${schema}".chaos_effects) as effects,
              (select count(*)::int from "${schema}".processed_effects) as ledger`,
    )
    log(
      `jobs: ${tally!.jobs} (${tally!.completed} completed, ${tally!.failed} failed), ${tally!.effects} effect rows, ${tally!.ledger} ledger keys`,
    )
    if (unaccounted!.n > 0) log(`lost adds: ${unaccounted!.n} (job ids ${unaccounted!.sample?.slice(0, 200)})`)
    if (missing!.n > 0) log(`completed jobs missing an effect: ${missing!.n}`)
    if (dup!.n > 0) log(`effect keys applied more than once: ${dup!.n} (${dup!.sample?.slice(0, 200)})`)
    const {
      rows: [limits],
    } = await pool.query<{
      runs: number
      overlap: number
      groupOverlap: number
      window: number
      leaked: number
      unfinished: number
    }>(
      `select (select count(*)::int from "${schema}".chaos_runs) as runs,
         coalesce((select max((select count(*) from "${schema}".chaos_runs o
                               where o.started_at <= s.started_at and o.ended_at > s.started_at))
                   from "${schema}".chaos_runs s), 0)::int as overlap,
         coalesce((select max((select count(*) from "${schema}".chaos_runs o
                               where o.group_id = s.group_id and o.started_at <= s.started_at
                                 and o.ended_at > s.started_at))
                   from "${schema}".chaos_runs s), 0)::int as "groupOverlap",
         coalesce((select max((select count(*) from "${schema}".chaos_runs o
                               where o.claimed_at >= s.claimed_at and o.claimed_at < s.claimed_at + $1 * interval '1 ms'))
                   from "${schema}".chaos_runs s), 0)::int as window,
         (select count(*)::int from "${schema}".limit_slots where job_id is not null) as leaked,
         (select count(*)::int from "${schema}".jobs where queue = 'chaos-limited' and state <> 'completed') as unfinished`,
      [LIMITED.rateLimit.durationMs],
    )
    log(
      `chaos-limited: ${limits!.runs} runs recorded, at most ${limits!.overlap} at once (limit ${LIMITED.concurrency}), ` +
        `at most ${limits!.groupOverlap} of one group at once (limit ${LIMITED.group.concurrency}), ` +
        `at most ${limits!.window} claims in ${LIMITED.rateLimit.durationMs} ms (limit ${LIMITED.rateLimit.max}), ` +
        `${limits!.leaked} slots held after the drain, ${limits!.unfinished} jobs not completed`,
    )
    const exceeded =
      (limits!.overlap > LIMITED.concurrency ? 1 : 0) +
      (limits!.groupOverlap > LIMITED.group.concurrency ? 1 : 0) +
      (limits!.window > LIMITED.rateLimit.max ? 1 : 0) +
      limits!.leaked +
      limits!.unfinished
    for (const c of crashes) log(`crash: ${c}`)
    if ((reAdds?.stale ?? 0) > 0) log(`re-adds answered by the removed key's owner (lost jobs): ${reAdds?.stale}`)
    const lost = unaccounted!.n + missing!.n + (left === 0 ? 0 : left) + (reAdds?.stale ?? 0)
    const duplicated = dup!.n
    const crashed = crashes.length
    await cleanup()
    log(`lost=${lost} duplicated=${duplicated} crashed=${crashed} exceeded=${exceeded}`)
    process.exit(lost + duplicated + crashed + exceeded > 0 ? 1 : 0)
  } catch (err) {
    await cleanup()
    process.stderr.write(`chaos: ${(err as Error).stack ?? String(err)}\n`)
    process.exit(2)
  }
}
