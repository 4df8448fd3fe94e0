// A limited queue's throughput as a share of its limit (docs/flow-control.md, "What it costs"): a backlog drained by
// one Worker of concurrency 16 under each limit, the starts and ends read from the database clock (jobs.started_at,
// finished_at), FLOW_SHARE_ROUNDS rounds (default 3) on fresh schemas:
// - rateLimit { max: 500, durationMs: 1000 }, 2,000 no-op jobs: the starts after the first window's burst per second,
//   ÷ 500 (a sliding window admits max starts, then one start for each that leaves the window);
// - concurrency 8, 800 jobs of 20 ms: jobs per second from the first start to the last end, ÷ 8 / 20 ms = 400/s;
// - group concurrency 1, 400 jobs of 20 ms over 20 groups: the same, ÷ 20 / 20 ms = 1,000/s.
//
//   DATABASE_URL=… npx tsx bench/flow-share.ts

import pg from 'pg'
import { type Limits, Queue, Worker, migrate } from '../src/index.js'

const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const rounds = Number(process.env.FLOW_SHARE_ROUNDS ?? 3)

interface Case {
  name: string
  limits: Limits
  jobs: number
  handlerMs: number
  groups?: number
  /** The share of the limit, from the starts and ends (ms since the first start, in order). */
  share(starts: number[], ends: number[]): number
}

const cases: Case[] = [
  {
    name: 'rateLimit 500 per 1,000 ms',
    limits: { rateLimit: { max: 500, durationMs: 1_000 } },
    jobs: 2_000,
    handlerMs: 0,
    share: (starts) => (starts.length - 500) / ((starts.at(-1) as number) / 1000) / 500,
  },
  {
    name: 'concurrency 8, jobs of 20 ms',
    limits: { concurrency: 8 },
    jobs: 800,
    handlerMs: 20,
    share: (_s, ends) => 800 / (Math.max(...ends) / 1000) / (8 / 0.02),
  },
  {
    name: 'group concurrency 1 over 20 groups, jobs of 20 ms',
    limits: { group: { concurrency: 1 } },
    jobs: 400,
    handlerMs: 20,
    groups: 20,
    share: (_s, ends) => 400 / (Math.max(...ends) / 1000) / (20 / 0.02),
  },
]

async function once(c: Case): Promise<number> {
  const schema = `flow_share_${Math.floor(Math.random() * 1e9)}`
  await migrate({ connectionString: url, schema })
  const queue = new Queue('limited', { connectionString: url, schema, migrate: false })
  const admin = new pg.Pool({ connectionString: url, max: 1 })
  try {
    await queue.setLimits(c.limits)
    await queue.addBulk(
      Array.from({ length: c.jobs }, (_, i) => ({
        name: 'j',
        data: {},
        opts: c.groups === undefined ? {} : { group: { id: `g${i % c.groups}` } },
      })),
    )
    let done = 0
    let all: () => void = () => {}
    const finished = new Promise<void>((resolve) => (all = resolve))
    const worker = new Worker(
      'limited',
      async () => {
        if (c.handlerMs > 0) await new Promise((r) => setTimeout(r, c.handlerMs))
        if (++done === c.jobs) all()
      },
      { connectionString: url, schema, concurrency: 16, migrate: false },
    )
    await finished
    await worker.close()
    const { rows } = await admin.query<{ s: number; e: number }>(
      `select extract(epoch from started_at - min(started_at) over ()) * 1000 as s,
              extract(epoch from finished_at - min(started_at) over ()) * 1000 as e
       from "${schema}".jobs where state = 'completed' order by started_at`,
    )
    return c.share(
      rows.map((r) => Number(r.s)),
      rows.map((r) => Number(r.e)),
    )
  } finally {
    await queue.close()
    await admin.query(`drop schema "${schema}" cascade`)
    await admin.end()
  }
}

for (const c of cases) {
  const shares: number[] = []
  for (let r = 0; r < rounds; r++) shares.push(await once(c))
  const sorted = [...shares].sort((a, b) => a - b)
  process.stdout.write(
    `${c.name}: ${(100 * (sorted[Math.floor(sorted.length / 2)] as number)).toFixed(0)}% of the limit ` +
      `(${shares.map((s) => `${(100 * s).toFixed(0)}%`).join(', ')})\n`,
  )
}
