// Reads a hand-off NOTIFY ('!handoff <worker id> <backend pid> <job JSON>', sent by _hand_off(), migration 000008), and
// gives back the hand-offs a lost LISTEN session took with it. Kept for its measurement: with hand-offs W6's latency
// is 1.37x shorter (1.13-1.66), W4 0.92x and W8 1.10x, within the noise (bench:pairs against the same code with adds
// never handing off, 2026-12-04; bench/README.md, "Settle polls and hand-offs, on and off").

import type { Logger } from '../logger.js'
import type { ClaimedRow, JobStore } from './job-store.js'

const PREFIX = '!handoff '

/** Whether a NOTIFY payload is a hand-off (to any worker). */
export function isHandOff(payload: string): boolean {
  return payload.startsWith(PREFIX)
}

/**
 * The job a hand-off gives to this worker's LISTEN session (`workerId`, backend `pid`), or null when it names another
 * worker or session. Only the named session takes it, so no two workers run one hand-off; a worker whose session was
 * replaced ignores the ones sent to the old session (housekeeping rescues them when their lease expires).
 */
export function handedOffTo(payload: string, workerId: string, pid: number | null): ClaimedRow | null {
  if (pid === null || !payload.startsWith(`${PREFIX}${workerId} ${pid} `)) return null
  const row = JSON.parse(payload.slice(PREFIX.length + workerId.length + String(pid).length + 2)) as ClaimedRow
  return row.state === 'active' && typeof row.id === 'string' && typeof row.lock_token === 'string' ? row : null
}

/**
 * After the LISTEN session was replaced: gives back the hand-offs sent to the old one that never arrived (run not
 * counted; `held`: the lock tokens the worker holds), rather than leaving them to the lease rescue. The new session
 * must not take hand-offs before this returns: one it took could be among those found.
 */
export async function releaseLostHandOffs(store: JobStore, held: string[], logger: Logger): Promise<void> {
  const lost = await store.lostHandOffs(held)
  if (lost.length === 0) return
  await store.release(lost.map((j) => j.id), lost.map((j) => j.token), 0)
  logger.info({ jobs: lost.map((j) => j.id) }, 'pgonce: hand-offs sent to the lost LISTEN session given back')
}
