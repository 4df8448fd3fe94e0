// Throughput against latency: drain and add rates for one and for three consumer hosts at 0, 1, 2 and 5 ms
// RTT, pgonce beside graphile-worker and pg-boss, all in the same network namespaces of the test bed
// (dev/netns/bed.ts), each host reaching PostgreSQL through its own latency proxy (dev/latency-proxy.ts). Root only.
//
//   tsx bench/latency.ts            LATENCY_JOBS=10000 (backlog per drain), LATENCY_ADDS=200 (sequential adds per host),
//                                   LATENCY_ROUNDS=2 (the best of them per cell), LATENCY_RTTS=0,1,2,5 (asked, the
//                                   first one the 100%), LATENCY_SYSTEMS=pgonce,graphile-worker,pg-boss
//                                   (each may name a configuration: pgonce:large-batches)
//
// Drain: a backlog of LATENCY_JOBS no-op jobs committed at once (one bulk add, straight to the server) while the
// consumers sleep; timed from the commit until the system reports none unfinished. Adds: each host adds LATENCY_ADDS
// jobs one after another, awaited, through its proxy; the rate is all hosts' adds over the slowest host's time. The
// RTT column is measured: `select 1` through a proxy, median of 50 (a Node timer fires no earlier than 1 ms, so a
// requested 1 ms RTT costs about 2).

import { fileURLToPath } from 'node:url'
import pg from 'pg'
import { Bed, type BedHost } from '../dev/netns/bed.js'
import { type Child, captured } from '../test/helpers/processes.js'
import { dropDatabase, freshDatabase } from './databases.js'
import { percentile, pollUntil } from './measure.js'
import { systemById } from './systems/registry.js'

const JOBS = Number(process.env.LATENCY_JOBS ?? 10_000)
const ADDS = Number(process.env.LATENCY_ADDS ?? 200)
const RTTS = (process.env.LATENCY_RTTS ?? '0,1,2,5').split(',').map(Number)
/** Rounds over the RTTs, in alternating order (0→5, then 5→0) so that no RTT is always measured first; best kept. */
const ROUNDS = Number(process.env.LATENCY_ROUNDS ?? 2)
const DEFAULT_CONFIGS: Record<string, string> = {
  pgonce: 'default',
  'graphile-worker': 'local-queue',
  'pg-boss': 'notify-batch',
}
/** LATENCY_SYSTEMS: ids, each with `:config` or its default above (e.g. `pgonce:large-batches,graphile-worker`). */
const SYSTEMS = (process.env.LATENCY_SYSTEMS ?? Object.keys(DEFAULT_CONFIGS).join(','))
  .split(',')
  .map((s) => s.split(':'))
  .map(([id, config]) => [id, config ?? DEFAULT_CONFIGS[id!]] as [id: string, config: string])
const CHILD = fileURLToPath(new URL('./latency-child.ts', import.meta.url))

interface Cell {
  system: string
  hosts: number
  rtt: number
  measuredRttMs: number
  drainPerS: number
  addsPerS: number
}

const through = (url: string, host: BedHost): string => {
  const u = new URL(url)
  u.port = String(host.proxy.port)
  return u.href
}

async function measureRtt(url: string): Promise<number> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  const samples: number[] = []
  for (let i = 0; i < 50; i++) {
    const t = performance.now()
    await client.query('select 1')
    samples.push(performance.now() - t)
  }
  await client.end()
  return percentile(samples, 50)
}

function startHost(bed: Bed, host: BedHost, task: object): Child {
  const command = [process.execPath, '--import', 'tsx', CHILD]
  return captured(bed.spawn(host, command, { BENCH_LATENCY: JSON.stringify(task) }, 'pipe'))
}

/** The `seen`-th message of `child` carrying `key` (0-based), once it has come. */
async function nth(child: Child, key: string, seen: number): Promise<Record<string, unknown>> {
  const carrying = (): Record<string, unknown>[] => child.messages().filter((m) => key in m)
  await pollUntil(async () => carrying().length > seen, 300_000, `a host's ${key}`)
  return carrying()[seen]!
}

async function runSystem(bed: Bed, id: string, config: string): Promise<Cell[]> {
  const info = systemById(id)
  const dbName = `latency_${id.replace(/-/g, '_')}`
  const url = await freshDatabase(bed.url, dbName)
  const system = await info.open(url, config)
  const cells: Cell[] = []
  const children: Child[] = []
  try {
    await system.prepare('one')
    await system.prepare('three')
    bed.hosts.forEach((host, i) =>
      children.push(
        startHost(bed, host, {
          system: id,
          config,
          url: through(url, host),
          queues: i === 0 ? ['one', 'three'] : ['three'],
        }),
      ),
    )
    await Promise.all(children.map((c) => nth(c, 'ready', 0)))
    const addRounds = [0, 0, 0]
    // Untimed warm-up on both queues (V8 compiles the hot paths, plpgsql its functions per connection).
    for (const queue of ['one', 'three']) {
      await system.addBulk(
        queue,
        Array.from({ length: 1_000 }, (_, i) => ({ i })),
      )
      for (const c of children) c.stdin!.write(`add ${queue} 20\n`)
      await Promise.all(children.map((c, i) => nth(c, 'added', addRounds[i]!++)))
      await pollUntil(async () => (await system.countUnfinished(queue)) === 0, 300_000, 'the warm-up to drain')
    }
    for (const rtt of Array.from({ length: ROUNDS }, (_, r) => (r % 2 === 0 ? RTTS : [...RTTS].reverse())).flat()) {
      for (const h of bed.hosts) h.proxy.roundTrip(rtt)
      const measuredRttMs = await measureRtt(through(url, bed.hosts[0]!))
      for (const hosts of [1, 3]) {
        const queue = hosts === 1 ? 'one' : 'three'
        const backlog = Array.from({ length: JOBS }, (_, i) => ({ i }))
        await system.addBulk(queue, backlog)
        const t0 = performance.now()
        await pollUntil(async () => (await system.countUnfinished(queue)) === 0, 300_000, 'the backlog to drain')
        const drainMs = performance.now() - t0
        const adders = children.slice(0, hosts)
        for (const c of adders) c.stdin!.write(`add ${queue} ${ADDS}\n`)
        const added = await Promise.all(adders.map((c, i) => nth(c, 'added', addRounds[i]!++)))
        const slowest = Math.max(...added.map((a) => a.ms as number))
        await pollUntil(async () => (await system.countUnfinished(queue)) === 0, 300_000, 'the adds to drain')
        cells.push({
          system: labelOf(id, config),
          hosts,
          rtt,
          measuredRttMs,
          drainPerS: Math.round((JOBS / drainMs) * 1000),
          addsPerS: Math.round(((ADDS * hosts) / slowest) * 1000),
        })
        process.stderr.write(`${JSON.stringify(cells[cells.length - 1])}\n`)
      }
    }
  } finally {
    for (const c of children) c.stdin?.end('stop\n')
    await Promise.all(children.map((c) => new Promise((r) => (c.exitCode !== null ? r(null) : c.once('exit', r)))))
    await system.close()
    await dropDatabase(bed.url, dbName).catch(() => {})
  }
  return cells
}

/** A system's label in the table, with its configuration when it is not the one the table uses by default. */
function labelOf(id: string, config: string): string {
  const label = systemById(id).label
  return config === DEFAULT_CONFIGS[id] ? label : `${label} (${config})`
}

/** The best of a cell's rounds: the highest drain and add rates, the lowest RTT measured. */
function best(rounds: Cell[]): Cell {
  return {
    ...rounds[0]!,
    drainPerS: Math.max(...rounds.map((c) => c.drainPerS)),
    addsPerS: Math.max(...rounds.map((c) => c.addsPerS)),
    measuredRttMs: Math.min(...rounds.map((c) => c.measuredRttMs)),
  }
}

/** The table for bench/README.md: per system and host count, at each RTT asked, drain (% of 0 ms) · adds (RTT measured). */
function table(cells: Cell[]): string {
  const rows = [
    `| system | hosts | ${RTTS.map((r) => `${r} ms asked: drain · adds/s (RTT measured)`).join(' | ')} |`,
    `| --- | --- | ${RTTS.map(() => '---').join(' | ')} |`,
  ]
  const n = (x: number): string => x.toLocaleString('en-US')
  for (const [id, config] of SYSTEMS) {
    const label = labelOf(id, config)
    for (const hosts of [1, 3]) {
      const mine = RTTS.map((r) => best(cells.filter((c) => c.system === label && c.hosts === hosts && c.rtt === r)))
      const base = mine[0]!.drainPerS
      const cell = (c: Cell): string =>
        `${n(c.drainPerS)} (${Math.round((c.drainPerS / base) * 100)}%) · ${n(c.addsPerS)} (${c.measuredRttMs.toFixed(1)} ms)`
      rows.push(`| ${label} | ${hosts} | ${mine.map(cell).join(' | ')} |`)
    }
  }
  return rows.join('\n')
}

const bed = await Bed.create({ hosts: 3, log: (m) => process.stderr.write(`${m}\n`) })
try {
  const cells: Cell[] = []
  for (const [id, config] of SYSTEMS) cells.push(...(await runSystem(bed, id, config)))
  process.stdout.write(`${table(cells)}\n`)
  process.stdout.write(
    `\n${JOBS} jobs per drain, ${ADDS} sequential adds per host, concurrency 16 per host, best of ${ROUNDS} rounds\n`,
  )
} finally {
  await bed.destroy()
}
