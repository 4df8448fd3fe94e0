// Timing helpers for the workloads: concurrent producers, percentiles, polling with a deadline.

/** Runs `work(i)` for i in [0, total) from `producers` concurrent loops; resolves with the elapsed ms. */
export async function runProducers(
  total: number,
  producers: number,
  work: (i: number) => Promise<void>,
): Promise<number> {
  let next = 0
  const loop = async (): Promise<void> => {
    for (let i = next++; i < total; i = next++) await work(i)
  }
  const started = performance.now()
  await Promise.all(Array.from({ length: Math.min(producers, total) }, loop))
  return performance.now() - started
}

/** An error's stack (or message), for a log line or a result file. */
export function errorText(err: unknown): string {
  return err instanceof Error ? (err.stack ?? err.message) : String(err)
}

/** Operations per second. */
export function perSecond(ops: number, ms: number): number {
  return ms > 0 ? (ops * 1000) / ms : 0
}

/** The p-th percentile (0..100) of `samples`, nearest-rank. */
export function percentile(samples: readonly number[], p: number): number {
  if (samples.length === 0) return Number.NaN
  const sorted = [...samples].sort((a, b) => a - b)
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)))
  return sorted[rank - 1] as number
}

/** Polls `done()` until it is true; throws once `deadlineMs` has passed. */
export async function pollUntil(
  done: () => Promise<boolean>,
  deadlineMs: number,
  what: string,
  everyMs = 5,
): Promise<void> {
  const deadline = performance.now() + deadlineMs
  while (!(await done())) {
    if (performance.now() > deadline) throw new Error(`timed out after ${deadlineMs} ms waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, everyMs))
  }
}

/** Resolves with `promise`, or rejects once `ms` has passed. */
export async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms)
  })
  try {
    return await Promise.race([promise, timeout])
  } finally {
    clearTimeout(timer)
  }
}
