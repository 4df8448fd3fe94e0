// Waiting on a condition instead of a fixed sleep: `waitFor` polls a probe with a deadline; `waitUntilBlockedBehind`
// waits until the server shows a session blocked by another one (pg_stat_activity and pg_blocking_pids).

import type pg from 'pg'

/** Polls `probe` every 20 ms until it returns something other than undefined/false; throws after `timeoutMs`. */
export async function waitFor<T>(
  probe: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs: number,
  what: string,
): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await probe()
    if (value !== undefined && value !== false) return value
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 20))
  }
}

/** Waits until at least one session waits for a lock backend `pid` holds. */
export async function waitUntilBlockedBehind(
  pool: pg.Pool,
  pid: number,
  what: string,
  timeoutMs = 30_000,
): Promise<void> {
  await waitFor(
    async () =>
      (
        await pool.query<{ n: number }>(
          'select count(*)::int as n from pg_stat_activity where $1 = any(pg_blocking_pids(pid))',
          [pid],
        )
      ).rows[0]!.n > 0,
    timeoutMs,
    what,
  )
}
