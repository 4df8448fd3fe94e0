// The dashboard at scale: every GET route timed server side with 1,000,000 completed jobs, and what a GIN
// index on jobs.data would cost the adds. Run once by hand (a few minutes, most of it the seeding):
//   DATABASE_URL=postgres://… npx tsx bench/dashboard-scale.ts [--jobs 1000000] [--hot] [--gin-only | --no-gin]
// --hot finishes every completed job within the last hour (the throughput view's worst case) instead of over 24 hours.
// Figures go to bench/README.md ("The dashboard at scale"); test/dashboard.scale.test.ts guards the plans in CI.

import { randomBytes } from 'node:crypto'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import pg from 'pg'
import { Queue, migrate } from '../src/index.js'
import { dashboard } from '../src/dashboard/index.js'
import { startPostgres } from '../dev/postgres-server.js'
import { seedJobs } from '../test/helpers/dashboard-seed.js'

const arg = (name: string) => process.argv.includes(name)
const jobsArg = process.argv.indexOf('--jobs')
const JOBS = jobsArg > 0 ? Number(process.argv[jobsArg + 1]) : 1_000_000
const SAMPLES = 20

const postgres = await startPostgres()
const url = postgres.url
const admin = new pg.Pool({ connectionString: url, max: 2 })

async function freshSchema(label: string): Promise<string> {
  const schema = `bench_${label}_${randomBytes(3).toString('hex')}`
  await migrate({ connectionString: url, schema })
  return schema
}

const percentile = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))] as number

async function timeRoutes(schema: string): Promise<void> {
  const handler = dashboard({ connectionString: url, schema })
  const times = new Map<string, number[]>()
  // Server side: from the request's arrival to the last byte handed to the socket.
  const server = http.createServer((req, res) => {
    const start = process.hrtime.bigint()
    const route = req.url ?? ''
    res.on('finish', () => {
      const list = times.get(route) ?? []
      list.push(Number(process.hrtime.bigint() - start) / 1e6)
      times.set(route, list)
    })
    handler(req, res)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const first = await (await fetch(`${origin}/api/jobs?queue=big&state=completed&limit=50`)).json()
  const routes = [
    '/api/config',
    '/api/queues',
    '/api/jobs?queue=big&state=completed&limit=50',
    `/api/jobs?queue=big&state=completed&limit=50&after=${(first as { next: string }).next}`,
    '/api/jobs?queue=big&state=completed&limit=200',
    '/api/jobs?queue=big&state=failed&limit=50',
    '/api/jobs?queue=big&state=waiting&limit=50',
    '/api/jobs?queue=big&state=delayed&limit=50',
    '/api/jobs?queue=big&limit=50',
    '/api/jobs?state=completed&limit=50',
    '/api/jobs?queue=small&state=completed&limit=50',
    '/api/jobs?queue=big&search=500000',
    '/api/jobs?queue=big&search=k-big-77',
    `/api/jobs?queue=big&state=completed&search=${encodeURIComponent('{"customer":7}')}&limit=50`,
    `/api/jobs?queue=big&state=completed&search=${encodeURIComponent('{"customer":-1}')}&limit=50`,
    '/api/jobs/500000',
    '/api/keys?limit=50',
    '/api/keys?search=k-big-77',
    '/api/effects',
    '/api/schedulers',
    '/api/failed',
  ]
  for (const route of routes) {
    for (let i = 0; i < SAMPLES; i++) {
      const res = await fetch(origin + route)
      if (res.status !== 200) throw new Error(`${route}: ${res.status} ${await res.text()}`)
      await res.arrayBuffer()
    }
  }
  server.close()
  await handler.close()
  console.log('| route | p50 ms | p95 ms | max ms |\n| --- | ---: | ---: | ---: |')
  for (const [route, list] of times) {
    const shown = route.length > 90 ? `${route.slice(0, 87)}...` : route
    console.log(
      `| \`${shown}\` | ${percentile(list, 0.5).toFixed(1)} | ${percentile(list, 0.95).toFixed(1)} | ${Math.max(...list).toFixed(1)} |`,
    )
  }
}

/** Adds per second: 2,000 single adds from 8 producers, then 20,000 in batches of 500 (each job's data ~150 bytes). */
async function addRate(schema: string): Promise<{ single: number; bulk: number }> {
  const q = new Queue('adds', { connectionString: url, schema, poolSize: 8 })
  const data = (i: number) => ({ customer: i % 1000, order: `order-${i}`, items: [i, i + 1], note: 'x'.repeat(64) })
  for (let i = 0; i < 200; i++) await q.add('warm', data(i))
  let t = performance.now()
  let next = 0
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (next < 2_000) await q.add('a', data(next++))
    }),
  )
  const single = 2_000 / ((performance.now() - t) / 1000)
  t = performance.now()
  for (let b = 0; b < 40; b++) await q.addBulk(Array.from({ length: 500 }, (_, i) => ({ name: 'b', data: data(i) })))
  const bulk = 20_000 / ((performance.now() - t) / 1000)
  await q.close()
  return { single, bulk }
}

async function ginCost(): Promise<void> {
  const rows: string[] = []
  const sums = { without: { single: 0, bulk: 0 }, with: { single: 0, bulk: 0 } }
  // Alternating rounds, a fresh schema each: the drift of the machine falls on both sides alike.
  for (let round = 0; round < 3; round++) {
    for (const gin of [false, true]) {
      const schema = await freshSchema('gin')
      if (gin) await admin.query(`create index jobs_data_gin on "${schema}".jobs using gin (data jsonb_path_ops)`)
      const r = await addRate(schema)
      const side = gin ? sums.with : sums.without
      side.single += r.single
      side.bulk += r.bulk
      rows.push(
        `round ${round + 1} ${gin ? 'with GIN   ' : 'without GIN'}: ${r.single.toFixed(0)} single adds/s, ${r.bulk.toFixed(0)} bulk jobs/s`,
      )
      await admin.query(`drop schema "${schema}" cascade`)
    }
  }
  console.log(rows.join('\n'))
  console.log(
    `GIN on data: single adds ${((sums.with.single / sums.without.single - 1) * 100).toFixed(1)} %, ` +
      `bulk ${((sums.with.bulk / sums.without.bulk - 1) * 100).toFixed(1)} %`,
  )
}

try {
  if (!arg('--gin-only')) {
    const schema = await freshSchema('dash')
    const t = performance.now()
    const spreadMs = arg('--hot') ? 3_500_000 : 86_400_000
    await seedJobs(admin, schema, {
      queue: 'big',
      completed: JOBS,
      failed: 10_000,
      waiting: 1_000,
      delayed: 1_000,
      spreadMs,
    })
    await seedJobs(admin, schema, { queue: 'small', completed: 100, failed: 10, waiting: 10 })
    await admin.query(
      `insert into "${schema}".dedup_keys (queue, key, job_id) select queue, 'k-' || queue || '-' || id, id from "${schema}".jobs where state = 'waiting'`,
    )
    await admin.query(
      `insert into "${schema}".processed_effects (effect_key, recorded_at) select 'effect:' || g, now() - make_interval(secs => g) from generate_series(1, 100000) g`,
    )
    await admin.query(`vacuum analyze "${schema}".dedup_keys, "${schema}".processed_effects`)
    console.log(
      `seeded ${JOBS} completed jobs (+ 10,000 failed, 2,000 pending) in ${((performance.now() - t) / 1000).toFixed(0)} s${arg('--hot') ? ', all finished within the last hour' : ' over 24 hours'}`,
    )
    await timeRoutes(schema)
    await admin.query(`drop schema "${schema}" cascade`)
  }
  if (!arg('--no-gin')) await ginCost()
} finally {
  await admin.end()
  await postgres.stop()
}
