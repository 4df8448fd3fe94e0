// The cost of flow control on a drain (docs/flow-control.md, "What it costs"): a backlog of no-op jobs, one Worker of
// concurrency 16 with the default batchSize (500; FLOW_BATCH=2000 gives W4's shape), drained in rounds that rotate the
// sides' order, each side on a fresh schema: pgonce without limits, pgonce with limits it never reaches (concurrency
// 5,000, above the jobs the Worker holds at most, and 10,000 starts per ms), pgonce with the jobs spread over 1,000
// groups of concurrency 1 (FLOW_GROUPS groups; a job of each group at a time, so the claims go through
// sql/claim-jobs-grouped.sql), and, with FLOW_BASELINE=<dir> (a checkout of an earlier commit with node_modules), that
// commit without limits and with the groups.
//
//   DATABASE_URL=… npx tsx bench/flow-control.ts            (FLOW_JOBS, default 10,000; FLOW_ROUNDS, default 5;
//                                                           FLOW_LIMITS, the limits as JSON, default both below)

import { pathToFileURL } from 'node:url'
import pg from 'pg'

type Api = typeof import('../src/index.js')
const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const jobs = Number(process.env.FLOW_JOBS ?? 10_000)
const rounds = Number(process.env.FLOW_ROUNDS ?? 5)
const limits = JSON.parse(
  process.env.FLOW_LIMITS ?? '{"concurrency":5000,"rateLimit":{"max":10000,"durationMs":1}}',
) as import('../src/index.js').Limits

const groups = Number(process.env.FLOW_GROUPS ?? 1_000)

interface Side {
  name: string
  api: Api
  limits: boolean
  /** The jobs spread over `groups` groups of concurrency 1 (and no other limit). */
  groups?: boolean
}

async function drainOnce(side: Side): Promise<number> {
  const { Queue, Worker, migrate } = side.api
  const schema = `flow_bench_${Math.floor(Math.random() * 1e9)}`
  await migrate({ connectionString: url, schema })
  const queue = new Queue('w4', { connectionString: url, schema, migrate: false })
  const admin = new pg.Pool({ connectionString: url, max: 1 })
  try {
    if (side.limits) await queue.setLimits(limits)
    if (side.groups) await queue.setLimits({ group: { concurrency: 1 } })
    for (let i = 0; i < jobs; i += 1_000) {
      await queue.addBulk(
        Array.from({ length: Math.min(1_000, jobs - i) }, (_, k) =>
          side.groups
            ? { name: 'j', data: {}, opts: { group: { id: `g${(i + k) % groups}` } } }
            : { name: 'j', data: {} },
        ),
      )
    }
    await admin.query(`vacuum analyze "${schema}".jobs`)
    let handled = 0
    let first = 0
    let done: () => void = () => {}
    const all = new Promise<void>((resolve) => (done = resolve))
    const worker = new Worker(
      'w4',
      async () => {
        if (handled === 0) first = performance.now()
        if (++handled === jobs) done()
      },
      {
        connectionString: url,
        schema,
        concurrency: 16,
        batchSize: Number(process.env.FLOW_BATCH ?? 500),
        migrate: false,
      },
    )
    await all
    // Until every completion is stored, as W4 counts.
    for (;;) {
      const { rows } = await admin.query<{ n: number }>(
        `select count(*)::int as n from "${schema}".jobs where state <> 'completed'`,
      )
      if (rows[0]?.n === 0) break
      await new Promise((r) => setTimeout(r, 5))
    }
    const ms = performance.now() - first
    await worker.close()
    return jobs / (ms / 1000)
  } finally {
    await queue.close()
    await admin.query(`drop schema "${schema}" cascade`)
    await admin.end()
  }
}

const here = await import('../src/index.js')
const sides: Side[] = [
  { name: 'no limits', api: here, limits: false },
  { name: 'limits not binding', api: here, limits: true },
  { name: `${groups} groups of concurrency 1`, api: here, limits: false, groups: true },
]
if (process.env.FLOW_BASELINE) {
  const api = (await import(pathToFileURL(`${process.env.FLOW_BASELINE}/src/index.ts`).href)) as Api
  sides.push({ name: 'baseline, no limits', api, limits: false })
  sides.push({ name: `baseline, ${groups} groups of concurrency 1`, api, limits: false, groups: true })
}
const rates = new Map<string, number[]>(sides.map((s) => [s.name, []]))
for (let r = 0; r < rounds; r++) {
  const order = sides.map((_, i) => sides[(i + r) % sides.length] as Side)
  for (const side of order) {
    const rate = await drainOnce(side)
    rates.get(side.name)!.push(rate)
    process.stdout.write(`round ${r + 1}: ${side.name} ${Math.round(rate)} jobs/s\n`)
  }
}
const geo = (xs: number[]) => Math.exp(xs.reduce((a, x) => a + Math.log(x), 0) / xs.length)
const base = rates.get('no limits')!
for (const [name, xs] of rates) {
  const ratios = xs.map((x, i) => x / (base[i] as number))
  process.stdout.write(
    `${name}: median ${Math.round([...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number)} jobs/s, ` +
      `÷ no limits ${geo(ratios).toFixed(2)}× (${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)})\n`,
  )
}
