// TCP ports for the servers a test starts of its own: a free one, and a wait until something listens on one.

import { connect, createServer } from 'node:net'
import { waitFor } from './wait.js'

/** A TCP port nobody listens on right now. */
export function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer()
    server.unref()
    server.on('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number }
      server.close(() => resolvePort(port))
    })
  })
}

/** Whether something accepts TCP connections on `port` of `host` now. */
function accepts(port: number, host: string): Promise<boolean> {
  return new Promise<boolean>((r) => {
    const s = connect(port, host)
    s.once('connect', () => (s.destroy(), r(true)))
    s.once('error', () => r(false))
  })
}

/** Resolves once something accepts TCP connections on `port`, or throws after `timeoutMs`. */
export async function waitForPort(port: number, timeoutMs: number, host = '127.0.0.1'): Promise<void> {
  await waitFor(() => accepts(port, host), timeoutMs, `something to listen on ${host}:${port}`)
}
