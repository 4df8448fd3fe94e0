// `npm run demo`: the seed guide's notification service end to end — duplicated comment events, worker processes (one killed mid-send), and an exactly-once check read from the database.

import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { Queue, migrate } from 'pgonce'
import { startPostgres } from '../dev/postgres-server.js'
import { Cleanup } from './demo-cleanup.js'
import { readConfig } from './demo-config.js'
import { DemoDb } from './demo-db.js'
import { Fleet, type KilledSend } from './demo-fleet.js'
import { type PushData, QUEUE } from './demo-messages.js'
import { type EventKind, planEvents } from './demo-plan.js'
import { LANES, Producers } from './demo-producers.js'
import { Story } from './demo-progress.js'
import { breakdownTable, summaryTable } from './demo-report.js'

const DRAIN_TIMEOUT_MS = 60_000
const SENDS_POLL_MS = 200

const config = readConfig()
const story = new Story(config.quiet)
const cleanup = new Cleanup()
const seconds = (since: number): string => `${((performance.now() - since) / 1000).toFixed(1)} s`

// Without DATABASE_URL the brief is an embedded server (no container detection); PGONCE_TEST_POSTGRES still overrides.
process.env.PGONCE_TEST_POSTGRES ??= process.env.DATABASE_URL?.trim() ? 'env' : 'embedded'

let interrupted = false
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    interrupted = true
    story.stopBars()
    process.stderr.write(`\n${signal}: stopping the workers and dropping the demo's schema\n`)
    void cleanup.run().finally(() => process.exit(130))
  })
}

async function run(): Promise<boolean> {
  const started = performance.now()
  story.say(
    `pgonce demo: a notification service gets ${config.events} comment events for ${config.users} users, duplicates and all`,
  )

  const server = await startPostgres()
  cleanup.add('stop postgres', () => server.stop())
  story.say(`postgres: ${server.kind === 'env' ? 'DATABASE_URL' : server.kind} server, ready in ${seconds(started)}`)

  const connectionString = server.url
  const schema = `pgonce_demo_${randomBytes(3).toString('hex')}`
  const app = new pg.Pool({ connectionString, max: LANES + 2 })
  // A connection the server drops (its shutdown after Ctrl-C, or after pool.end(), which does not wait for the
  // connections to close) emits 'error' on the pool when idle and on the client when checked out between queries:
  // without listeners that crashes the process. The query that next uses it gets the error anyway.
  app.on('error', () => {})
  app.on('connect', (client) => client.on('error', () => {}))
  cleanup.add('close the app pool', () => app.end())
  const db = new DemoDb(app, schema)
  cleanup.add(`drop schema ${schema}`, () => db.dropSchema())
  await migrate({ connectionString, schema })
  await db.createTables()
  story.say(`schema ${schema}: pgonce's tables plus comments and sent_notifications (dropped at the end)`)

  const queue = new Queue<PushData>(QUEUE, { connectionString, schema, migrate: false, poolSize: LANES })
  cleanup.add('close the queue', () => queue.close())
  const fleet = new Fleet({
    DEMO_DATABASE_URL: connectionString,
    DEMO_SCHEMA: schema,
    DEMO_SEND_MS: String(config.sendMs),
    DEMO_LEASE_MS: String(config.leaseMs),
    DEMO_CONCURRENCY: String(config.concurrency),
  })
  cleanup.add('stop the workers', () => fleet.stopAll())
  const workers = await Promise.all(Array.from({ length: config.workers }, () => fleet.start()))
  story.say(
    `workers: ${workers.length} processes (pid ${workers.map((w) => w.pid).join(', ')}), ${config.concurrency} handlers each, lease ${config.leaseMs / 1000} s`,
  )

  const plan = planEvents(config.events, config.users, config.seed)
  const count = (kind: EventKind): number => plan.web.filter((e) => e.kind === kind).length
  story.say(
    `web tier: ${count('post')} comments posted (row + queue.add in one transaction), ${count('retry')} requests retried, ${count('edit')} comments edited`,
  )

  // The story's second act: a third of the way in, one worker dies inside a send and another takes its place.
  const [victim] = workers
  if (victim === undefined) throw new Error('no worker to kill')
  const killAt = Math.max(1, Math.floor(plan.web.length / 3))
  let killing: Promise<KilledSend> | null = null
  const killAndReplace = async (): Promise<KilledSend> => {
    const { killed, replacement } = await fleet.replaceDuringSend(victim)
    story.say(
      `kill: SIGKILL to worker ${killed.pid} inside the send of job ${killed.jobId} (push to user ${killed.userId} about comment ${killed.commentId})`,
    )
    story.say(
      `restart: worker ${replacement.pid} replaces it; the dead worker's jobs come back once its lease runs out`,
    )
    return killed
  }

  let fired = 0
  const total = plan.web.length + plan.broker.length
  const producers = new Producers(app, queue, schema, () => {
    story.firedSoFar(++fired, total)
    if (fired !== killAt) return
    killing = killAndReplace()
    // Awaited once the web tier is done; a failure before then must not go unhandled.
    killing.catch(() => {})
  })
  story.startBars(total, plan.comments.length)
  const stopFollowing = story.followSends(() => db.sentCount(), SENDS_POLL_MS)
  cleanup.add('stop the progress bar', async () => {
    stopFollowing()
    story.stopBars()
  })

  const webStarted = performance.now()
  await producers.fire(plan.web)
  story.say(
    `web tier: ${plan.web.length} events fired in ${seconds(webStarted)}; waiting for the workers (and for the rescue)`,
  )
  if (killing === null) throw new Error('the kill never started')
  const killed = await (killing as Promise<KilledSend>)
  await db.waitForDrain(queue, DRAIN_TIMEOUT_MS)

  story.say(
    `broker: ${plan.broker.length} messages delivered again after their jobs ran (enqueued by message id, no dedup key)`,
  )
  await producers.fire(plan.broker)
  await db.waitForDrain(queue, DRAIN_TIMEOUT_MS)
  stopFollowing()
  story.sendsDone(await db.sentCount())
  story.stopBars()
  story.say(`all jobs done in ${seconds(started)}`)
  return report(db, producers, fleet, killed, plan.comments.length)
}

/** Prints the tables and the verdicts, all read back from the database; true when every push went out exactly once. */
async function report(
  db: DemoDb,
  producers: Producers,
  fleet: Fleet,
  killed: KilledSend,
  posted: number,
): Promise<boolean> {
  const jobs = await db.jobOutcomes()
  const check = await db.exactlyOnce()
  const victim = await db.jobAndSends(killed.jobId)
  const rescuedOnce =
    victim.state === 'completed' &&
    victim.attempts >= 2 &&
    victim.sends === 1 &&
    victim.lastError?.startsWith('lease expired') === true
  story.say(
    `the killed send: job ${killed.jobId} is ${victim.state} after ${victim.attempts} attempts${victim.lastError?.startsWith('lease expired') ? ', rescued after its lease' : ''}; its push was sent ${victim.sends} time${victim.sends === 1 ? '' : 's'}`,
  )
  story.say('')
  story.say(breakdownTable({ tally: producers.tally, jobs, sent: check.rows }))
  story.say(summaryTable({ tally: producers.tally, jobs, sent: check.rows }))

  const once =
    check.expected === posted &&
    check.once === posted &&
    check.repeated === 0 &&
    check.missing === 0 &&
    check.strays === 0
  story.say(`exactly once: ${once ? 'yes' : 'NO'}`)
  story.say(
    `  (sent_notifications grouped by (user, comment): ${check.once} of ${posted} posted comments notified once, ` +
      `${check.missing} never, ${check.repeated} more than once; ${check.strays} rows for comments never posted)`,
  )
  if (!rescuedOnce) story.say(`the killed job was not rescued and sent once: ${JSON.stringify(victim)}`)
  for (const error of fleet.errors) process.stderr.write(`${error}\n`)
  if (fleet.output() !== '') process.stderr.write(`worker stderr:\n${fleet.output()}`)
  return once && rescuedOnce
}

let code = 1
try {
  code = (await run()) ? 0 : 1
} catch (err) {
  // Ctrl-C reaches the server and the workers too: their failure may arrive here a moment before the signal does.
  await new Promise((resolve) => setTimeout(resolve, 250))
  if (!interrupted) {
    story.stopBars()
    process.stderr.write(`demo failed: ${(err as Error).stack ?? String(err)}\n`)
  }
}
await cleanup.run()
process.exit(interrupted ? 130 : code)
