// The demo's own tables (comments, sent_notifications) and the SQL that reads the outcome back from the database.

import type pg from 'pg'
import type { Queue } from 'pgonce'
import { type PushData, QUEUE } from './demo-messages.js'

const TERMINAL = new Set(['completed', 'failed', 'cancelled'])

export interface JobOutcomes {
  /** Completed runs whose ctx.effect sent the push. */
  sent: number
  /** Completed runs whose ctx.effect found the push in the ledger, by the door the event came in by. */
  webLedgerSkips: number
  brokerLedgerSkips: number
  failed: number
  /** Jobs taken back by housekeeping after their worker's lease expired. */
  rescued: number
}

export class DemoDb {
  constructor(
    private readonly pool: pg.Pool,
    readonly schema: string,
  ) {}

  private get s(): string {
    return `"${this.schema}"`
  }

  /** The application's tables, next to pgonce's in the demo's schema. */
  async createTables(): Promise<void> {
    await this.pool.query(`
      create table ${this.s}.comments (
        id bigint primary key, user_id int not null, body text not null, edits int not null default 0,
        created_at timestamptz not null default now());
      -- No unique constraint on (user_id, comment_id), on purpose: a second send would be stored, and counted below.
      create table ${this.s}.sent_notifications (
        id bigserial primary key, user_id int not null, comment_id bigint not null, job_id bigint not null,
        worker_pid int not null, sent_at timestamptz not null default now());`)
  }

  async dropSchema(): Promise<void> {
    await this.pool.query(`drop schema if exists ${this.s} cascade`)
  }

  async sentCount(): Promise<number> {
    const { rows } = await this.pool.query<{ n: number }>(`select count(*)::int as n from ${this.s}.sent_notifications`)
    return rows[0]?.n ?? 0
  }

  /** Waits until no job of `queue` is pending or running (whatever the states are called); throws after `timeoutMs`. */
  async waitForDrain(queue: Queue<PushData>, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      const counts: Record<string, number> = await queue.getJobCounts()
      const live = Object.entries(counts).reduce((n, [state, count]) => (TERMINAL.has(state) ? n : n + count), 0)
      if (live === 0) return
      if (Date.now() > deadline)
        throw new Error(`jobs still pending or running after ${timeoutMs} ms: ${JSON.stringify(counts)}`)
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
  }

  /** The state of one job (the one killed mid-send) and how often its push was sent. */
  async jobAndSends(
    jobId: string,
  ): Promise<{ state: string; attempts: number; lastError: string | null; sends: number }> {
    const { rows } = await this.pool.query<{
      state: string
      attempts: number
      last_error: string | null
      sends: number
    }>(
      `
      select j.state, j.attempts, j.last_error,
        (select count(*)::int from ${this.s}.sent_notifications s
          where s.user_id = (j.data->>'userId')::int and s.comment_id = (j.data->>'commentId')::bigint) as sends
      from ${this.s}.jobs j where j.id = $1`,
      [jobId],
    )
    const row = rows[0]
    if (row === undefined) throw new Error(`job ${jobId} not found`)
    return { state: row.state, attempts: row.attempts, lastError: row.last_error, sends: row.sends }
  }

  /** How the jobs ended: runs that sent, runs that found their push in the ledger (by door), failed jobs, and rescues. */
  async jobOutcomes(): Promise<JobOutcomes> {
    const { rows } = await this.pool.query<JobOutcomes>(
      `
      select
        count(*) filter (where state = 'completed' and result #>> '{}' = 'ran')::int as "sent",
        count(*) filter (where state = 'completed' and result #>> '{}' = 'duplicate-done' and data->>'via' = 'web')::int as "webLedgerSkips",
        count(*) filter (where state = 'completed' and result #>> '{}' = 'duplicate-done' and data->>'via' = 'broker')::int as "brokerLedgerSkips",
        count(*) filter (where state = 'failed')::int as "failed",
        -- Housekeeping writes this when it takes a job back from a worker whose lease expired.
        count(*) filter (where last_error like 'lease expired%')::int as "rescued"
      from ${this.s}.jobs where queue = $1`,
      [QUEUE],
    )
    return rows[0] as JobOutcomes
  }

  /**
   * Counts the sent_notifications rows of every posted (user, comment): `once` must be all of them, and no row
   * may name a (user, comment) that was never posted.
   */
  async exactlyOnce(): Promise<{
    expected: number
    once: number
    missing: number
    repeated: number
    strays: number
    rows: number
  }> {
    const { rows } = await this.pool.query<{
      expected: number
      once: number
      missing: number
      repeated: number
      strays: number
      rows: number
    }>(`
      with per_comment as (
        select c.user_id, c.id, count(s.id) as n
        from ${this.s}.comments c
        left join ${this.s}.sent_notifications s on s.user_id = c.user_id and s.comment_id = c.id
        group by c.user_id, c.id)
      select
        count(*)::int as expected,
        count(*) filter (where n = 1)::int as once,
        count(*) filter (where n = 0)::int as missing,
        count(*) filter (where n > 1)::int as repeated,
        (select count(*)::int from ${this.s}.sent_notifications s
          where not exists (select 1 from ${this.s}.comments c where c.id = s.comment_id and c.user_id = s.user_id)) as strays,
        (select count(*)::int from ${this.s}.sent_notifications) as rows
      from per_comment`)
    return rows[0] as {
      expected: number
      once: number
      missing: number
      repeated: number
      strays: number
      rows: number
    }
  }
}
