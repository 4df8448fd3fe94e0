// The demo's closing tables: which layer absorbed each kind of duplicate, then the totals and the exactly-once verdict.

import Table from 'cli-table3'
import type { JobOutcomes } from './demo-db.js'
import type { AddTally } from './demo-producers.js'
import { EVENT_KINDS, type EventKind } from './demo-plan.js'

export interface Outcome {
  tally: AddTally
  jobs: JobOutcomes
  /** Rows in sent_notifications. */
  sent: number
}

const LABEL: Record<EventKind, string> = {
  post: 'comments posted',
  retry: 'web-tier retries',
  edit: 'edit re-fires',
  redelivery: 'broker redeliveries',
}

// No colours (the tables must read the same in a terminal, a pipe and a log file), no rules between rows.
const PLAIN = { head: [], border: [], compact: true }

function fired(tally: AddTally, kind: EventKind): number {
  return Object.values(tally[kind]).reduce((a, b) => a + b, 0)
}

/** What the breakdown's columns count, printed under it. */
const BREAKDOWN_LEGEND = [
  'new job: queue.add added a job. by jobId, by dedup key: queue.add answered with the job already there, adding none.',
  'by effect ledger: of the new jobs, those whose run found its push already recorded by ctx.effect (processed_effects)',
  'and sent nothing: a broker message redelivered after its job finished (a finished jobId lets a new job in), or a job',
  'run again after its worker was killed between the push and the completion.',
].join('\n')

/**
 * Rows per kind of event, columns per layer: how `queue.add` answered, and (for jobs that ran) the ledger; the legend
 * under it.
 */
export function breakdownTable(o: Outcome): string {
  const table = new Table({
    head: ['event', 'fired', 'new job', 'by jobId', 'by dedup key', 'by effect ledger'],
    colAligns: ['left', 'right', 'right', 'right', 'right', 'right'],
    style: PLAIN,
  })
  for (const kind of EVENT_KINDS) {
    const t = o.tally[kind]
    // Only jobs that ran meet the ledger: the posts' (0, unless a run found its own push) and the redelivered ones.
    const ledger = kind === 'post' ? o.jobs.webLedgerSkips : kind === 'redelivery' ? o.jobs.brokerLedgerSkips : 0
    table.push([LABEL[kind], fired(o.tally, kind), t.added, t['duplicate-job-id'], t['duplicate-key'], ledger])
  }
  return `${table.toString()}\n${BREAKDOWN_LEGEND}`
}

export function summaryTable(o: Outcome): string {
  const sum = (outcome: 'duplicate-job-id' | 'duplicate-key'): number =>
    EVENT_KINDS.reduce((n, k) => n + o.tally[k][outcome], 0)
  const table = new Table({ colAligns: ['left', 'right'], style: PLAIN })
  table.push(
    ['events fired', EVENT_KINDS.reduce((n, k) => n + fired(o.tally, k), 0)],
    ['duplicates absorbed by jobId', sum('duplicate-job-id')],
    ['duplicates absorbed by dedup key', sum('duplicate-key')],
    ['duplicates absorbed by the effect ledger', o.jobs.webLedgerSkips + o.jobs.brokerLedgerSkips],
    ['notifications sent', o.sent],
    ['jobs rescued after the kill', o.jobs.rescued],
    ['jobs failed', o.jobs.failed],
  )
  return table.toString()
}
