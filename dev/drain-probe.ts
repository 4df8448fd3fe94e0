// A lab probe, not a benchmark: drains N queued no-op jobs of queue Q with one Worker (concurrency 16) and prints
// jobs/s, the machine's and the Node process's CPU time over the drain (the rest is mostly PostgreSQL's) and, per
// statement kind, how many were sent, how many jobs each carried and their mean latency. For before/after checks of
// the worker's statement pattern (see src/worker/completer.ts); the comparison with peers is bench/.
//
//   DATABASE_URL=… N=100000 Q=notifications npx tsx --conditions=development dev/drain-probe.ts [package root]
//   DROP_INDEXES=jobs_finished,…  drops those indexes of the probe's schema first (what an index costs the drain)
//   AS_IS=1  skips the VACUUM ANALYZE before the drain (the bench's as-is mode: a backlog never vacuumed nor analysed)
//   HEAP_PROFILE=file  samples the Node process's allocations over the drain (V8's sampling heap profiler, objects
//               collected since included) and writes the profile to that file (.heapprofile: Chrome DevTools reads it)
//   WORKERS=n  drains with n Workers sharing the pool, each of concurrency 16 / n (CONCURRENCY=c: c each): n claims in
//               flight at once instead of one (bench/README.md, "A second claim in flight")
//   BATCH_SIZE=n  the Workers' batchSize (default: the Worker's own, 500; bench/README.md, "Claims of 2,000")
//   DROP_FKS=1  drops the three foreign keys to jobs (dedup_keys, job_dependencies) first: with a checkout whose
//               completion deletes the row, what their ON DELETE CASCADE triggers cost (bench/README.md, "What deleting a job costs")
//
// A package root (another commit's checkout, e.g. `git worktree add /tmp/base 4a0a88e` with a link to this
// node_modules) drains with that version's Worker and migrations: alternate the two runs to compare versions.

import { readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { Session } from 'node:inspector/promises'
import { availableParallelism } from 'node:os'
import { resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import pg from 'pg'
import type * as PgonceApi from '../src/index.js'
import { dropJobForeignKeys } from './probe-database.js'

const root = resolve(process.argv[2] ?? '.')
const { Worker, migrate } = (await import(pathToFileURL(`${root}/src/index.ts`).href)) as typeof PgonceApi

const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const schema = `probe_drain_${Math.random().toString(16).slice(2, 8)}`
const N = Number(process.env.N ?? 100_000)
const Q = process.env.Q ?? 'd'
const admin = new pg.Pool({ connectionString: url, max: 2 })
await migrate({ connectionString: url, schema })
try {
  await admin.query(`insert into "${schema}".jobs (queue, name, data) select $2, 'n', '{}' from generate_series(1, $1)`, [N, Q])
  for (const index of (process.env.DROP_INDEXES ?? '').split(',').filter((x) => x !== '')) {
    await admin.query(`drop index "${schema}"."${index}"`)
  }
  if (process.env.DROP_FKS) await dropJobForeignKeys(admin, schema)
  if (!process.env.AS_IS) await admin.query(`vacuum analyze "${schema}".jobs`)
  const stats = new Map<string, { n: number; items: number; ms: number }>()
  const pool = new pg.Pool({ connectionString: url, max: 19 })
  const query = pool.query.bind(pool) as (...args: unknown[]) => Promise<unknown>
  ;(pool as unknown as { query: (...args: unknown[]) => Promise<unknown> }).query = (...args: unknown[]) => {
    const config = args[0] as string | { text: string; values?: unknown[][] }
    const text = typeof config === 'string' ? config : config.text
    const values = (typeof config === 'string' ? args[1] : config.values) as unknown[][] | undefined
    let kind = (text.split('\n')[0] ?? '').slice(0, 48)
    let items = 0
    if (kind.startsWith('-- Completes jobs') || kind.startsWith('-- Starts claimed-ahead')) {
      kind = kind.startsWith('-- Completes') ? 'completions' : 'starts'
      items = values?.[0]?.length ?? 0
    } else if (kind.startsWith('-- Claims up to')) items = Number(values?.[1])
    const s = stats.get(kind) ?? { n: 0, items: 0, ms: 0 }
    stats.set(kind, s)
    s.n++
    s.items += items
    const sent = performance.now()
    const answer = query(...args)
    answer.then(() => { s.ms += performance.now() - sent }, () => {})
    return answer
  }
  /** Busy CPU time of the whole machine so far (user, nice, system, irq, softirq), in ms (/proc/stat, Linux). */
  const machine = (): number => {
    const f = (readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '').trim().split(/\s+/).slice(1).map(Number)
    return ((f[0] ?? 0) + (f[1] ?? 0) + (f[2] ?? 0) + (f[5] ?? 0) + (f[6] ?? 0)) * 10
  }
  /** CPU time of every process named postgres so far (utime + stime, /proc/<pid>/stat), in ms: the server's share. */
  const server = (): number => {
    let ticks = 0
    for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
        if (!stat.includes('(postgres)')) continue
        const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
        ticks += Number(f[11]) + Number(f[12])
      } catch { /* gone meanwhile */ }
    }
    return ticks * 10
  }
  const server0 = server()
  const busy0 = machine()
  const cpu0 = process.cpuUsage()
  const heap = process.env.HEAP_PROFILE ? await sampleAllocations() : undefined
  let done = 0
  let first = 0
  let last = 0
  const count = Number(process.env.WORKERS ?? 1)
  const concurrency = Number(process.env.CONCURRENCY ?? Math.ceil(16 / count))
  const started = performance.now()
  const workers = Array.from({ length: count }, () =>
    new Worker(Q, async () => { if (first === 0) first = performance.now() }, { pool, schema, concurrency, migrate: false, ...(process.env.BATCH_SIZE ? { batchSize: Number(process.env.BATCH_SIZE) } : {}) }))
  for (const worker of workers) worker.on('completed', () => { done++; last = performance.now() })
  while (done < N) await new Promise((resolve) => setTimeout(resolve, 50))
  if (heap !== undefined) writeFileSync(process.env.HEAP_PROFILE as string, JSON.stringify(await heap()))
  const busy = machine() - busy0
  const serverBusy = server() - server0
  const cpu = process.cpuUsage(cpu0)
  for (const worker of workers) await worker.close()
  await pool.end()
  const cores = availableParallelism()
  process.stdout.write(`${Math.round((N * 1000) / (last - first))} jobs/s; machine busy ${((busy * 100) / ((last - started) * cores)).toFixed(0)}% of ${cores} cores; CPU per job: machine ${(busy * 1000 / N).toFixed(0)} µs, ` +
    `Node ${((cpu.user + cpu.system) / N).toFixed(0)} µs, server ${(serverBusy * 1000 / N).toFixed(0)} µs\n`)
  for (const [kind, s] of stats) {
    process.stdout.write(`${kind.padEnd(50)} ${String(s.n).padStart(7)} sent, ${(s.items / s.n).toFixed(1).padStart(6)} jobs each, ${(s.ms / s.n).toFixed(2)} ms\n`)
  }
} finally {
  await admin.query(`drop schema "${schema}" cascade`)
  await admin.end()
}

/** Starts V8's sampling heap profiler (objects collected by either GC included); the returned call stops it. */
async function sampleAllocations(): Promise<() => Promise<unknown>> {
  const session = new Session()
  session.connect()
  await session.post('HeapProfiler.enable')
  // The two include flags exist in Node 20's V8 but not yet in its inspector typings.
  await session.post('HeapProfiler.startSampling', { samplingInterval: 4096, includeObjectsCollectedByMinorGC: true, includeObjectsCollectedByMajorGC: true } as object)
  return async () => (await session.post('HeapProfiler.stopSampling')).profile
}
