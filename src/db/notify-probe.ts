// Whether a LISTEN connection hears NOTIFYs sent from another connection: behind a transaction-mode pooler it does not.

import { randomBytes } from 'node:crypto'

/** How long a probe waits for its own NOTIFY. */
export const PROBE_WAIT_MS = 2_000
/** How long a listener that heard nothing waits before it tries again. */
export const PROBE_RETRY_MS = 30_000

/**
 * A probe NOTIFY, sent from pgonce's pool (sql/notify-probe.sql) and awaited on the LISTEN connection. A pooler in
 * transaction mode runs the LISTEN on whichever server connection is free at that moment and gives that connection to
 * the next client: the LISTEN connection hears nothing, while everything else seems to work.
 */
export class NotifyProbe {
  private readonly waiting = new Map<string, () => void>()

  constructor(
    /** The probes' payload prefix on the channel (each listener its own). */
    private readonly prefix: string,
    /** Sends a NOTIFY with `payload` on the channel from another connection. */
    private readonly send: (payload: string) => Promise<unknown>,
  ) {}

  /** Takes a payload heard on the LISTEN connection: true if it is a probe (this process's or another's), for nobody else. */
  heard(payload: string): boolean {
    if (!payload.startsWith(this.prefix)) return false
    this.waiting.get(payload)?.()
    return true
  }

  /** Sends a probe: true once it is heard, false after PROBE_WAIT_MS; rejects if it could not be sent. */
  async hears(): Promise<boolean> {
    const payload = `${this.prefix}${randomBytes(6).toString('hex')}`
    let timer: NodeJS.Timeout | undefined
    const heard = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), PROBE_WAIT_MS)
      this.waiting.set(payload, () => resolve(true))
    })
    try {
      await this.send(payload)
      return await heard
    } finally {
      clearTimeout(timer)
      this.waiting.delete(payload)
    }
  }
}
