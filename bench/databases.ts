// Creates and drops the benchmark's own databases on the server under test.

import pg from 'pg'
import { createDatabase } from '../test/support/postgres-server.js'

/** A fresh (dropped and re-created) database `name`; returns its connection string. */
export function freshDatabase(serverUrl: string, name: string): Promise<string> {
  return createDatabase(serverUrl, name)
}

/** Drops database `name` (connected through the server's maintenance database). */
export async function dropDatabase(serverUrl: string, name: string): Promise<void> {
  const admin = new URL(serverUrl)
  admin.pathname = '/postgres'
  const client = new pg.Client({ connectionString: admin.toString() })
  await client.connect()
  try {
    await client.query(`drop database if exists ${client.escapeIdentifier(name)} with (force)`)
  } finally {
    await client.end()
  }
}
