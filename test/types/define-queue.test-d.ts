// Type tests of defineQueue, checked by `tsc -p tsconfig.json` (npm run typecheck): what a definition's Queue and Worker
// accept and give. Every `@ts-expect-error` below must be an error, or tsc fails (TS2578); test/types/define-queue.test.ts
// compiles the mismatches on their own and checks which error each one is.

import { expectTypeOf } from 'vitest'
import { type Job, Queue, Worker, defineQueue } from '../../src/index.js'

type Push = { userId: number; text: string }
type Digest = { userId: number; since: string }
const notifications = defineQueue<{ push: Push; digest: Digest }, { push: { sent: boolean }; digest: number }>(
  'notifications',
)
const options = { connectionString: 'postgres://localhost/x' }

export async function producer(): Promise<void> {
  const queue = notifications.queue(options)
  const job = await queue.add('push', { userId: 1, text: 'hi' })
  expectTypeOf(job.name).toEqualTypeOf<'push'>()
  expectTypeOf(job.data).toEqualTypeOf<Push>()
  expectTypeOf(job.result).toEqualTypeOf<{ sent: boolean } | null>()

  // @ts-expect-error: a name the queue lacks
  await queue.add('pish', { userId: 1, text: 'hi' })
  // @ts-expect-error: digest's data under push
  await queue.add('push', { userId: 1, since: '2026-01-01' })
  // @ts-expect-error: an item whose data is another name's
  await queue.addBulk([{ name: 'digest', data: { userId: 1, text: 'x' } }])

  const ended = await queue.waitForJob(job.id, { timeoutMs: 1_000 })
  if (ended.name === 'digest') {
    expectTypeOf(ended.data).toEqualTypeOf<Digest>()
    expectTypeOf(ended.result).toEqualTypeOf<number | null>()
  } else {
    expectTypeOf(ended.result).toEqualTypeOf<{ sent: boolean } | null>()
  }
  // The Queue's other methods are there, untouched.
  expectTypeOf(queue.getJobCounts).returns.resolves.toHaveProperty('waiting')
  expectTypeOf(queue).toMatchTypeOf<{ name: string; close(): Promise<void> }>()
}

export function consumers(): void {
  notifications.worker(
    {
      push: async (job) => {
        expectTypeOf(job.data).toEqualTypeOf<Push>()
        return { sent: job.data.text.length > 0 }
      },
      digest: async (job) => job.data.since.length,
    },
    options,
  )
  notifications.worker(async (job) => {
    switch (job.name) {
      case 'push':
        return { sent: job.data.text !== '' }
      case 'digest':
        return job.data.userId
    }
  }, options)

  // @ts-expect-error: a handler missing for digest
  notifications.worker({ push: async () => ({ sent: true }) }, options)
  notifications.worker(
    {
      push: async () => ({ sent: true }),
      digest: async () => 1,
      // @ts-expect-error: a handler of a name the queue lacks
      pish: async () => 1,
    },
    options,
  )
  notifications.worker(
    {
      // @ts-expect-error: push's handler returns digest's result
      push: async () => 1,
      digest: async () => 1,
    },
    options,
  )
  notifications.worker(async (job) => {
    // @ts-expect-error: data of another queue's shape
    return job.data.email
  }, options)
}

export function batches(): void {
  notifications.batchWorker(
    async (jobs) => {
      expectTypeOf(jobs[0]!.name).toEqualTypeOf<'push' | 'digest'>()
      return jobs.map((job) => (job.name === 'push' ? { sent: job.data.text !== '' } : job.data.userId))
    },
    { ...options, batch: { size: 10 } },
  )
  // @ts-expect-error: a batch worker without its batch options
  notifications.batchWorker(async () => [], options)
  // @ts-expect-error: an outcome that is no name's result
  notifications.batchWorker(async (jobs) => jobs.map(() => 'done'), { ...options, batch: { size: 10 } })
}

export function untypedStillWorks(): void {
  // The untyped API keeps working: a free name, data typed by the class's parameter, result unknown.
  const queue = new Queue<{ userId: number }>('plain', options)
  expectTypeOf(queue.add).parameter(0).toEqualTypeOf<string>()
  new Worker<{ email: string }>('plain', async (job: Job<{ email: string }>) => job.data.email, options)
  expectTypeOf<Job<{ userId: number }>['result']>().toEqualTypeOf<unknown>()
}
