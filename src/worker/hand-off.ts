// Reads a hand-off NOTIFY ('!handoff <worker id> <backend pid> <job JSON>', sent by _hand_off(), migration 000008).

import type { ClaimedRow } from './job-store.js'

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
