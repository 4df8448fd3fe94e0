// Counts the queries this process sends through node-postgres (every system here uses the same pg): its round trips.

import pg from 'pg'

let sent = 0
let installed = false

/** Starts counting (idempotent); returns a reader of the total so far. */
export function countRoundTrips(): () => number {
  if (!installed) {
    installed = true
    const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown }
    const original = proto.query
    proto.query = function countedQuery(this: unknown, ...args: unknown[]) {
      sent++
      return original.apply(this, args)
    }
  }
  return () => sent
}
