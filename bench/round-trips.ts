// Counts the queries this process sends through node-postgres (every system here uses the same pg), i.e. its round trips, and what they were.

import pg from 'pg'

let sent = 0
const kinds = new Map<string, number>()
let installed = false

/** A statement's kind: its first line (pgonce's SQL files open with a comment naming the query), cut short. */
function kindOf(query: unknown): string {
  const text = typeof query === 'string' ? query : (query as { text?: unknown } | null)?.text
  if (typeof text !== 'string') return '(other)'
  const first = text.trim().split('\n', 1)[0] ?? ''
  return first.length > 80 ? `${first.slice(0, 77)}...` : first
}

/** Starts counting (idempotent); returns a reader of the total so far. */
export function countRoundTrips(): () => number {
  if (!installed) {
    installed = true
    const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown }
    const original = proto.query
    proto.query = function countedQuery(this: unknown, ...args: unknown[]) {
      sent++
      const kind = kindOf(args[0])
      kinds.set(kind, (kinds.get(kind) ?? 0) + 1)
      return original.apply(this, args)
    }
  }
  return () => sent
}

/** How many queries of each kind were sent so far (after `countRoundTrips()`). */
export function statementKinds(): Map<string, number> {
  return new Map(kinds)
}
