// queue.waitForJob: the calls of one Queue waiting for jobs to end, woken by one shared LISTEN connection and a poll.

import type pg from 'pg'
import { MAX_TIMER_MS } from './db/connection.js'
import type { Execute } from './db/executor.js'
import { channelOf } from './db/identifiers.js'
import { listenConfig } from './db/listen-config.js'
import { sqlFor } from './db/sql-files.js'
import { WaitForJobError, WaitForJobTimeoutError } from './errors.js'
import type { JobRow } from './job.js'
import type { Logger } from './logger.js'
import { checkInteger, checkOptions, fail } from './validate.js'
import { WaitListener } from './wait-listener.js'

/** The options of `queue.waitForJob`. */
export interface WaitForJobOptions {
  /** How long to wait for the job to end, in ms; then the call rejects with `WaitForJobTimeoutError`. Required. */
  timeoutMs: number
  /** Stops waiting when it aborts: the call rejects with the signal's reason. (Default: none) */
  signal?: AbortSignal
}

const TERMINAL = new Set(['completed', 'failed', 'cancelled'])

/** Checks `queue.waitForJob`'s options before any I/O. */
export function checkWaitOptions(options: unknown): { timeoutMs: number; signal: AbortSignal | undefined } {
  const opts = checkOptions<WaitForJobOptions>(options, 'options', ['timeoutMs', 'signal'])
  if (opts.timeoutMs === undefined) fail('REQUIRED', 'options.timeoutMs', 'is required: how long to wait, in ms')
  const timeoutMs = checkInteger(opts.timeoutMs, 'options.timeoutMs', 1, MAX_TIMER_MS)
  if (opts.signal !== undefined && !(opts.signal instanceof AbortSignal)) {
    fail('INVALID_TYPE', 'options.signal', 'must be an AbortSignal')
  }
  return { timeoutMs, signal: opts.signal }
}

/**
 * The waits of Queue `queue`: LISTEN goes where the pool does, or to `listenConnectionString`, as `pgonce-waiter <queue>`;
 * statements run through the Queue's executor (migrated on first use, refused once closed).
 */
export function queueWaiters(
  queue: string,
  schema: string,
  pool: pg.Pool,
  opts: { listenConnectionString: string | null; waitPollIntervalMs: number },
  logger: Logger,
  executor: () => Promise<Execute>,
): JobWaiters {
  return new JobWaiters({
    queue,
    schema,
    channel: `${channelOf(schema)}:done`,
    listenConfig: () => listenConfig(pool, opts.listenConnectionString, `pgonce-waiter ${queue}`.slice(0, 63)),
    read: async (ids) => (await executor())<JobRow>(sqlFor('wait-for-jobs', schema), [queue, ids]),
    probe: async (payload) => (await executor())(sqlFor('wait-probe', schema), [payload]),
    logger,
    pollMs: opts.waitPollIntervalMs,
  })
}

/** What the waits need from their Queue. */
export interface WaitersSetup {
  queue: string
  schema: string
  /** The LISTEN connection's settings (src/db/listen-config.ts). */
  listenConfig: () => pg.ClientConfig
  /** The waiters channel of the schema. */
  channel: string
  /** Marks and reads jobs of the queue (sql/wait-for-jobs.sql). */
  read: (ids: string[]) => Promise<JobRow[]>
  /** Sends a probe NOTIFY on the waiters channel (sql/wait-probe.sql). */
  probe: (payload: string) => Promise<unknown>
  logger: Logger
  /** How often every waited job is read whatever LISTEN hears, in ms (±25 % jitter): the Queue's waitPollIntervalMs. */
  pollMs: number
}

/** One call waiting. */
interface Wait {
  readonly id: string
  /** The job's state when last read, for the timeout's message. */
  lastState: string | null
  /** Ends the call: with the row when `err` is undefined, else rejected with `err` (an abort's reason may be anything). */
  settle(err: unknown, row?: JobRow): void
}

/**
 * The waiting calls of one Queue, by job id. The first wait opens the LISTEN connection and the last one to end closes
 * it: no connection is held per call, and none while nobody waits. Each wait LISTENs first, then marks and reads its
 * job (an end committed before the mark is in that read; one committed after it NOTIFYs), so an end is never missed;
 * and every poll interval (the Queue's waitPollIntervalMs) all waited jobs are read in one statement, so that a NOTIFY lost with a dropped connection,
 * or never heard behind a pooler, only delays.
 */
export class JobWaiters {
  readonly #waits = new Map<string, Set<Wait>>()
  readonly #setup: WaitersSetup
  #listener: WaitListener | null = null
  #pollTimer: NodeJS.Timeout | undefined
  #closed = false

  constructor(setup: WaitersSetup) {
    this.#setup = setup
  }

  /** Resolves with job `id`'s row once it is terminal; rejects on timeout, abort, a missing job or close(). */
  wait(id: string, timeoutMs: number, signal: AbortSignal | undefined): Promise<JobRow> {
    if (signal?.aborted) return Promise.reject(signal.reason as Error)
    if (this.#closed) return Promise.reject(new WaitForJobError('QUEUE_CLOSED', id, this.#setup.queue))
    return new Promise<JobRow>((resolve, reject) => {
      let done = false
      const onAbort = (): void => wait.settle(signal?.reason ?? new Error('aborted'))
      const timer = setTimeout(() => wait.settle(new WaitForJobTimeoutError(id, timeoutMs, wait.lastState)), timeoutMs)
      const wait: Wait = {
        id,
        lastState: null,
        settle: (err, row) => {
          if (done) return
          done = true
          clearTimeout(timer)
          signal?.removeEventListener('abort', onAbort)
          this.#remove(wait)
          if (err === undefined) resolve(row as JobRow)
          // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- an abort's reason, as given
          else reject(err)
        },
      }
      signal?.addEventListener('abort', onAbort, { once: true })
      this.#add(wait)
      void this.#begin(wait)
    })
  }

  /** Rejects every wait with `QUEUE_CLOSED` and closes the LISTEN connection. */
  async close(): Promise<void> {
    this.#closed = true
    for (const waits of [...this.#waits.values()]) {
      for (const w of [...waits]) w.settle(new WaitForJobError('QUEUE_CLOSED', w.id, this.#setup.queue))
    }
    await this.#stopListening()
  }

  /** LISTEN (or its first failed attempt), then the first read; a failure of that read fails the call. */
  async #begin(wait: Wait): Promise<void> {
    try {
      await this.#listening()
      await this.#read([wait.id])
    } catch (err) {
      wait.settle(err)
    }
  }

  #listening(): Promise<void> {
    if (this.#listener === null) {
      const s = this.#setup
      this.#listener = new WaitListener(
        s.listenConfig(),
        s.channel,
        s.schema,
        {
          onNotify: (id) => {
            if (this.#waits.has(id)) this.#readQuietly([id])
          },
          onReconnect: () => this.#readQuietly([...this.#waits.keys()]),
        },
        s.logger,
        s.probe,
      )
    }
    return this.#listener.ready
  }

  /** Marks and reads `ids`, and ends the waits of those that ended or no longer exist. */
  async #read(ids: string[]): Promise<void> {
    if (ids.length === 0) return
    const rows = new Map((await this.#setup.read(ids)).map((r) => [r.id, r]))
    for (const id of ids) {
      const row = rows.get(id)
      for (const w of [...(this.#waits.get(id) ?? [])]) {
        if (row === undefined) w.settle(new WaitForJobError('NOT_FOUND', id, this.#setup.queue))
        else if (TERMINAL.has(row.state)) w.settle(undefined, row)
        else w.lastState = row.state
      }
    }
  }

  /** A read on a NOTIFY, a reconnect or a poll: a failure is logged, and the next poll reads again. */
  #readQuietly(ids: string[]): void {
    this.#read(ids).catch((err: Error) =>
      this.#setup.logger.warn({ err }, 'pgonce: waitForJob could not read the jobs it waits for; polling on'),
    )
  }

  #add(wait: Wait): void {
    let waits = this.#waits.get(wait.id)
    if (waits === undefined) this.#waits.set(wait.id, (waits = new Set()))
    waits.add(wait)
    this.#schedulePoll()
  }

  #remove(wait: Wait): void {
    const waits = this.#waits.get(wait.id)
    waits?.delete(wait)
    if (waits?.size === 0) this.#waits.delete(wait.id)
    if (this.#waits.size === 0) void this.#stopListening()
  }

  #schedulePoll(): void {
    if (this.#pollTimer !== undefined) return
    const every = this.#setup.pollMs
    this.#pollTimer = setTimeout(
      () => {
        this.#pollTimer = undefined
        if (this.#waits.size === 0) return
        // The next poll is timed from this one's answer: a slow server never has two polls in flight.
        void this.#read([...this.#waits.keys()])
          .catch((err: Error) => this.#setup.logger.warn({ err }, 'pgonce: waitForJob could not poll; polling on'))
          .finally(() => {
            if (this.#waits.size > 0) this.#schedulePoll()
          })
      },
      every * (0.75 + Math.random() / 2),
    )
  }

  async #stopListening(): Promise<void> {
    clearTimeout(this.#pollTimer)
    this.#pollTimer = undefined
    const listener = this.#listener
    this.#listener = null
    await listener?.stop()
  }
}
