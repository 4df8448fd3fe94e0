// The flow-control tests' records: each run's start and end on the database clock (<schema>.runs, written by the
// handlers), the most runs that overlapped, worker children that run them.

import type { TestSchema } from './schema.js'
import { type Child, spawnFixture } from './processes.js'

export async function createRuns(db: TestSchema): Promise<void> {
  await db.pool.query(
    `create table "${db.schema}".runs (id bigserial primary key, job_id bigint not null, pid int not null,
       attempt int not null, group_id text, started_at timestamptz not null, ended_at timestamptz)`,
  )
}

/**
 * The most runs of `queue` (or of one group) running at one instant, from the starts and ends the handlers recorded
 * (a run still going counts until now): checked at every start, where the count can grow.
 */
export async function maxOverlap(db: TestSchema, queue: string, group?: string): Promise<number> {
  const { rows } = await db.pool.query<{ max: number | null }>(
    `with r as (
       select r.* from "${db.schema}".runs r join "${db.schema}".jobs j on j.id = r.job_id
       where j.queue = $1 and ($2::text is null or r.group_id = $2))
     select max((select count(*) from r o
                 where o.started_at <= s.started_at and coalesce(o.ended_at, 'infinity') > s.started_at))::int as max
     from r s`,
    [queue, group ?? null],
  )
  return rows[0]?.max ?? 0
}

export async function runCount(db: TestSchema, queue: string): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>(
    `select count(*)::int as n from "${db.schema}".runs r join "${db.schema}".jobs j on j.id = r.job_id
     where j.queue = $1 and r.ended_at is not null`,
    [queue],
  )
  return rows[0]?.n ?? 0
}

/** Starts `n` flow-worker children of `queue`, each with `env` (CONCURRENCY, LEASE_MS, ...). */
export function flowWorkers(db: TestSchema, queue: string, n: number, env: Record<string, string> = {}): Child[] {
  return Array.from({ length: n }, () =>
    spawnFixture('flow-worker-child.ts', { PGONCE_URL: db.url, PGONCE_SCHEMA: db.schema, QUEUE: queue, ...env }),
  )
}

/** Concurrency slots of `queue` held now. */
export async function slotsInUse(db: TestSchema, queue: string): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>(
    `select count(*)::int as n from "${db.schema}".limit_slots where queue = $1 and job_id is not null`,
    [queue],
  )
  return rows[0]?.n ?? 0
}
