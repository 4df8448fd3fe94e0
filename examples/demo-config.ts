// The demo's sizes and timings, read from DEMO_* environment variables with defaults that finish well under a minute on 2 cores.

export interface DemoConfig {
  /** Comment events fired in all: posts plus their duplicates. */
  events: number
  /** Users whose posts get commented on (the recipients of the pushes). */
  users: number
  /** Worker processes running at once. */
  workers: number
  /** Handlers per worker process. */
  concurrency: number
  /** The push provider's latency, simulated inside each send (ms). */
  sendMs: number
  /** The workers' lease: a killed worker's jobs come back this long after its last heartbeat (ms). */
  leaseMs: number
  /** Seed of the event plan, so that a run can be repeated. */
  seed: number
  /** No progress bar (also off when stdout or stderr is not a terminal). */
  quiet: boolean
}

function int(name: string, fallback: number, min: number, max: number): number {
  const text = process.env[name]?.trim()
  if (text === undefined || text === '') return fallback
  const value = Number(text)
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new Error(`${name} must be an integer from ${min} to ${max}, got ${JSON.stringify(text)}`)
  }
  return value
}

export function readConfig(): DemoConfig {
  return {
    // A few thousand events: enough duplicates of each kind to be worth counting, still a few seconds of work.
    events: int('DEMO_EVENTS', 4_000, 20, 1_000_000),
    users: int('DEMO_USERS', 200, 1, 1_000_000),
    workers: int('DEMO_WORKERS', 2, 1, 8),
    concurrency: int('DEMO_CONCURRENCY', 8, 1, 64),
    sendMs: int('DEMO_SEND_MS', 5, 0, 10_000),
    leaseMs: int('DEMO_LEASE_MS', 2_000, 500, 60_000),
    seed: int('DEMO_SEED', 42, 0, 2 ** 31 - 1),
    quiet: process.env.DEMO_QUIET === '1',
  }
}
