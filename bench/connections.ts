// How many PostgreSQL connections a process of many Workers uses (docs/scaling.md): 50 Workers over 10
// queues in one process (concurrency 4 each, every other option at its default), idle and at the peak of draining a
// backlog, straight to PostgreSQL and through PgBouncer in transaction mode (LISTEN past it, as docs/operations.md
// says), each with a LISTEN connection per Worker (`listen: 'own'`) and with the default `listen: 'shared'`. Counted on the server (pg_stat_activity), on the test bed's own cluster (dev/netns/bed.ts; root only).
//
//   tsx bench/connections.ts          CONNECTIONS_JOBS=5000

import pg from 'pg'
import { Bed } from '../dev/netns/bed.js'
import { Queue, Worker, migrate } from '../src/index.js'
import { pgbouncerBinary, startPgbouncer } from '../test/helpers/pgbouncer.js'
import { pollUntil } from './measure.js'

const QUEUES = 10
const PER_QUEUE = 5
const CONCURRENCY = 4
const JOBS = Number(process.env.CONNECTIONS_JOBS ?? 5_000)
const BOUNCER_POOL = 20

interface Count {
  listeners: number
  others: number
}

async function count(admin: pg.Pool): Promise<Count> {
  const { rows } = await admin.query<{ listeners: number; others: number }>(
    `select count(*) filter (where application_name like 'pgonce-listener %')::int as listeners,
            count(*) filter (where application_name not like 'pgonce-listener %')::int as others
       from pg_stat_activity where backend_type = 'client backend' and pid <> pg_backend_pid()
        and application_name <> 'connections-admin'`,
  )
  return rows[0]!
}

async function scenario(
  bedUrl: string,
  admin: pg.Pool,
  via: 'direct' | 'pgbouncer',
  listen: 'own' | 'shared',
): Promise<string> {
  const schema = `conn_${via}_${listen}`
  await migrate({ connectionString: bedUrl, schema })
  const bouncer = via === 'pgbouncer' ? await startPgbouncer((await pgbouncerBinary())!, bedUrl, BOUNCER_POOL) : null
  const url = bouncer?.url ?? bedUrl
  const common = { connectionString: url, schema, migrate: false, concurrency: CONCURRENCY, listen }
  const extra = bouncer === null ? {} : { listenConnectionString: bedUrl, preparedStatements: false }
  const workers: Worker[] = []
  for (let q = 0; q < QUEUES; q++)
    for (let w = 0; w < PER_QUEUE; w++) {
      const worker = new Worker(`q${q}`, async () => {}, { ...common, ...extra })
      worker.on('error', () => {})
      workers.push(worker)
    }
  await Promise.all(workers.map((w) => w.run()))
  await new Promise((r) => setTimeout(r, 2_000))
  const idle = await count(admin)
  const producer = new Queue('q0', { connectionString: bedUrl, schema, migrate: false })
  let peak: Count = { listeners: 0, others: 0 }
  let sampling = true
  const sampler = (async () => {
    while (sampling) {
      const c = await count(admin)
      if (c.listeners + c.others > peak.listeners + peak.others) peak = c
      await new Promise((r) => setTimeout(r, 50))
    }
  })()
  for (let q = 0; q < QUEUES; q++) {
    const queue = new Queue(`q${q}`, { connectionString: bedUrl, schema, migrate: false })
    await queue.addBulk(Array.from({ length: JOBS / QUEUES }, (_, i) => ({ name: 'n', data: { i } })))
    await queue.close()
  }
  await pollUntil(
    async () => (await admin.query(`select 1 from "${schema}".jobs where state <> 'completed' limit 1`)).rowCount === 0,
    120_000,
    'the backlog to drain',
  )
  sampling = false
  await sampler
  await producer.close()
  await Promise.all(workers.map((w) => w.close()))
  await bouncer?.stop()
  const line = (c: Count): string => `${c.listeners + c.others} (${c.listeners} LISTEN + ${c.others} pool)`
  const where = via === 'direct' ? 'straight to PostgreSQL' : `PgBouncer (transaction mode, pool ${BOUNCER_POOL})`
  return `| ${where}, \`listen: '${listen}'\` | ${line(idle)} | ${line(peak)} |`
}

const bed = await Bed.create({ hosts: 0, settings: { max_connections: 600 } })
const admin = new pg.Pool({ connectionString: `${bed.url}?application_name=connections-admin`, max: 2 })
try {
  const rows = [
    `| 50 Workers (10 queues × 5, concurrency ${CONCURRENCY}) in one process | idle | peak while draining ${JOBS} jobs |`,
    '| --- | --- | --- |',
  ]
  for (const via of ['direct', 'pgbouncer'] as const)
    for (const listen of ['own', 'shared'] as const) rows.push(await scenario(bed.url, admin, via, listen))
  process.stdout.write(`${rows.join('\n')}\n`)
} finally {
  await admin.end()
  await bed.destroy()
}
