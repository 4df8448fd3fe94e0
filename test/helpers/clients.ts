// pg clients of a test's own: connect, roll back and end, their backend pid, the database clock, a terminated backend.

import pg from 'pg'

/** A pg.Client of the test's own, connected; `releaseClient(client)` rolls back whatever it left open and ends it. */
export async function connectClient(url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  return client
}

export async function releaseClient(client: pg.Client | undefined): Promise<void> {
  await client?.query('rollback').catch(() => {})
  await client?.end()
}

/** The backend pid of a connected pg.Client. */
export const backendPid = (client: pg.Client): number => (client as unknown as { processID: number }).processID

/** The database clock, now. */
export async function dbNow(pool: pg.Pool): Promise<Date> {
  return (await pool.query<{ now: Date }>('select clock_timestamp() as now')).rows[0]!.now
}

/** Terminates backend `pid`; true if the server found it. */
export async function terminate(pool: pg.Pool, pid: number): Promise<boolean> {
  return (await pool.query<{ ok: boolean }>('select pg_terminate_backend($1) as ok', [pid])).rows[0]!.ok
}
