// A consumer host of bench/latency.ts, run inside a namespace of the test bed (`ip netns exec`): opens one system on
// the URL through its host's latency proxy, consumes the queues it is given with concurrency 16, and on stdin takes
// `add <queue> <n>` (n sequential awaited adds, answered with their time) and `stop`. Reports as JSON lines on stdout.

import { createInterface } from 'node:readline'
import { systemById } from './systems/registry.js'

const task = JSON.parse(process.env.BENCH_LATENCY ?? 'null') as {
  system: string
  config: string
  url: string
  queues: string[]
} | null
if (task === null) throw new Error('latency-child runs as a child of bench/latency.ts (BENCH_LATENCY)')
const say = (message: Record<string, unknown>): void => void process.stdout.write(`${JSON.stringify(message)}\n`)

const system = await systemById(task.system).open(task.url, task.config)
const consumers = await Promise.all(task.queues.map((q) => system.consume(q, () => {})))
say({ ready: true })

let next = 0
for await (const line of createInterface({ input: process.stdin })) {
  const [verb, queue, n] = line.trim().split(/\s+/)
  if (verb === 'add' && queue !== undefined) {
    const started = performance.now()
    for (let i = 0; i < Number(n); i++) await system.add(queue, { i: next++ })
    say({ added: Number(n), ms: performance.now() - started })
  } else if (verb === 'stop') break
}
for (const c of consumers) await c.close()
await system.close()
process.exit(0)
