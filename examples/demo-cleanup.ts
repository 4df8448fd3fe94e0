// Undo steps the demo registers as it builds things up; run once, last registered first, on success, failure or Ctrl-C.

const STEP_TIMEOUT_MS = 20_000

export class Cleanup {
  private readonly steps: { what: string; fn: () => Promise<unknown> }[] = []
  private running: Promise<void> | null = null

  add(what: string, fn: () => Promise<unknown>): void {
    this.steps.push({ what, fn })
  }

  /** Runs every step (each bounded in time; a failing one is reported and the others still run). Later calls share the first run. */
  run(): Promise<void> {
    this.running ??= (async () => {
      for (const { what, fn } of this.steps.splice(0).reverse()) {
        let timer: NodeJS.Timeout | undefined
        const late = new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error(`no answer after ${STEP_TIMEOUT_MS} ms`)), STEP_TIMEOUT_MS)
        })
        try {
          await Promise.race([fn(), late])
        } catch (err) {
          process.stderr.write(`cleanup: ${what} failed: ${(err as Error).message}\n`)
        } finally {
          clearTimeout(timer)
        }
      }
    })()
    return this.running
  }
}
