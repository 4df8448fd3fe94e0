// Reads the server's WAL position, to report WAL bytes written per job (server-wide: other load on the server counts too).

import type pg from 'pg'

export async function walPosition(db: pg.Pool | pg.Client): Promise<string> {
  const { rows } = await db.query<{ lsn: string }>('select pg_current_wal_lsn()::text as lsn')
  return (rows[0] as { lsn: string }).lsn
}

export async function walBytesSince(db: pg.Pool | pg.Client, from: string): Promise<number> {
  const { rows } = await db.query<{ bytes: string }>('select pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::bigint::text as bytes', [from])
  return Number((rows[0] as { bytes: string }).bytes)
}
