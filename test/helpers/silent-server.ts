// Servers that go silent, for the bounded-wait tests: one that accepts TCP connections and never answers, and a proxy
// to the real PostgreSQL that stops forwarding on command (a stuck proxy or load balancer, a kernel stall).

import { type Server, type Socket, createServer, connect } from 'node:net'

export interface Silent {
  port: number
  /** Drops every connection and stops listening. */
  close(): Promise<void>
}

function listen(server: Server, sockets: Set<Socket>): Promise<Silent> {
  return new Promise((resolve, reject) => {
    server.on('error', reject)
    server.listen(0, '127.0.0.1', () =>
      resolve({
        port: (server.address() as { port: number }).port,
        close: () =>
          new Promise<void>((done) => {
            for (const s of sockets) s.destroy()
            server.close(() => done())
          }),
      }),
    )
  })
}

/** A server that accepts every connection, reads what it is sent, and never writes a byte nor closes. */
export function blackHole(): Promise<Silent> {
  const sockets = new Set<Socket>()
  const server = createServer((socket) => {
    sockets.add(socket)
    socket.on('data', () => {})
    socket.on('error', () => {})
    socket.on('close', () => sockets.delete(socket))
  })
  return listen(server, sockets)
}

export interface StallingProxy extends Silent {
  /** From now on nothing passes, on the connections open now or opened later: each is held open, silent both ways. */
  stall(): void
  /** New connections pass again; those stalled stay silent (as behind a proxy that lost them) until close(). */
  resume(): void
}

/** A TCP proxy to `target` (a postgres:// URL's host and port) that can be told to stop forwarding. */
export function stallingProxy(target: string): Promise<StallingProxy> {
  const { hostname, port } = new URL(target)
  const sockets = new Set<Socket>()
  const pairs = new Set<{ stalled: boolean }>()
  let stalled = false
  const server = createServer((client) => {
    sockets.add(client)
    client.on('error', () => {})
    client.on('close', () => sockets.delete(client))
    const pair = { stalled }
    if (pair.stalled) {
      client.on('data', () => {})
      return
    }
    pairs.add(pair)
    const upstream = connect(Number(port || 5432), hostname)
    sockets.add(upstream)
    upstream.on('error', () => {})
    upstream.on('close', () => {
      sockets.delete(upstream)
      if (!pair.stalled) client.destroy()
    })
    client.on('close', () => upstream.destroy())
    client.on('data', (chunk) => void (pair.stalled || upstream.write(chunk)))
    upstream.on('data', (chunk) => void (pair.stalled || client.write(chunk)))
  })
  return listen(server, sockets).then((silent) => ({
    ...silent,
    stall() {
      stalled = true
      for (const p of pairs) p.stalled = true
    },
    resume() {
      stalled = false
    },
  }))
}
