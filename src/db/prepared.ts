// Named prepared statements for the worker's hot queries: Postgres parses and plans each once per connection.

import { createHash } from 'node:crypto'
import { sqlFor } from './sql-files.js'

/** A pg query config with a name: node-postgres prepares it on first use on each connection. */
export interface PreparedQuery {
  name: string
  text: string
}

const cache = new Map<string, PreparedQuery>()

/** `sql/<name>.sql` for `schema`, named after a hash of its text (unique per text, well under 63 bytes). */
export function prepared(name: string, schema: string): PreparedQuery {
  const key = `${schema}\u0000${name}`
  let query = cache.get(key)
  if (query === undefined) {
    const text = sqlFor(name, schema)
    query = { name: `pgonce_${createHash('sha1').update(text).digest('hex').slice(0, 24)}`, text }
    cache.set(key, query)
  }
  return query
}
