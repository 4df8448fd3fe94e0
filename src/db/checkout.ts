// Checks a client out of a pool with an 'error' listener for as long as pgonce holds it, and runs transactions on it.

import type pg from 'pg'
import { DatabaseTimeoutError } from '../errors.js'
import type { Logger } from '../logger.js'

/**
 * Runs `fn` on a client of `pool`. The pool removes its own 'error' listener from a client it hands out, so a backend
 * terminated while the client sits between two statements would otherwise crash the process with an unhandled
 * 'error' event; pgonce listens for the whole checkout and reports it. A client that failed (its connection broke,
 * or `fn` called `discard`) is destroyed on release instead of going back to the pool.
 */
export async function withClient<T>(
  pool: pg.Pool,
  logger: Logger,
  fn: (client: pg.PoolClient, discard: (err: Error) => void) => Promise<T>,
): Promise<T> {
  let broken: Error | undefined
  const discard = (err: Error): void => {
    broken ??= err
  }
  const onError = (err: Error): void => {
    discard(err)
    logger.warn(
      { err },
      'pgonce: connection error while in use; the statement in flight fails and the connection is replaced',
    )
  }
  const client = await checkout(pool, onError)
  try {
    return await fn(client, discard)
  } finally {
    client.off('error', onError)
    client.release(broken)
  }
}

/**
 * `pool.connect()`, with `onError` listening from the moment the pool hands the client over. The pool removes its
 * idle listener in that same call, often from inside the socket read that delivered the previous holder's last answer;
 * a listener attached after `await` comes a microtask later, and a FATAL message in the same read (a backend
 * terminated right after answering, read at once by a busy process) would be emitted with nobody listening: an
 * uncaught exception. The callback form runs synchronously at the hand-over.
 */
function checkout(pool: pg.Pool, onError: (err: Error) => void): Promise<pg.PoolClient> {
  return new Promise((resolve, reject) => {
    pool.connect((err, client) => {
      if (client === undefined || (err !== undefined && err !== null))
        return reject(err ?? new Error('pgonce: the pool gave no connection'))
      client.on('error', onError)
      resolve(client)
    })
  })
}

/** Runs `fn` inside BEGIN … COMMIT on a checked-out client; rolls back if it throws (a failed rollback discards the client). */
export function inTransaction<T>(pool: pg.Pool, logger: Logger, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  return withClient(pool, logger, async (client, discard) => {
    await client.query('begin')
    let value: T
    try {
      value = await fn(client)
    } catch (err) {
      await client.query('rollback').catch(discard)
      throw err
    }
    try {
      await client.query('commit')
    } catch (err) {
      discard(err as Error)
      throw err
    }
    return value
  })
}

/**
 * A failure of the connection rather than of a statement: SQLSTATE class 08 or 57P, a wait that ran out (the statement
 * may have been written, its answer lost), or none at all from pg itself.
 */
export function isConnectionError(err: unknown): boolean {
  if (err instanceof DatabaseTimeoutError) return true
  const code = (err as { code?: unknown } | null)?.code
  if (typeof code === 'string') return code.startsWith('08') || code.startsWith('57P')
  const message = (err as { message?: unknown } | null)?.message
  return (
    typeof message === 'string' &&
    /Connection terminated|ECONNRESET|ECONNREFUSED|EPIPE|timeout exceeded when trying to connect|Client has encountered a connection error/i.test(
      message,
    )
  )
}
