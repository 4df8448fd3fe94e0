// One LISTEN connection for all the Workers of a process with `listen: 'shared'` (the default) that reach the same server
// and schema: every NOTIFY goes to each of them, and the connection holds one idle slot per queue while a Worker of that
// queue sleeps.

import { hostname } from 'node:os'
import type pg from 'pg'
import type { Logger } from '../logger.js'
import { Notifier, type NotifierEvents } from './notifier.js'

/** What a Worker and its fetcher use of a LISTEN connection, its own (Notifier) or shared. */
export interface Listener {
  readonly pid: number | null
  readonly listening: boolean
  start(): Promise<void>
  stop(): Promise<void>
  abandon(): void
  advertise(): Promise<boolean>
  withdraw(): void
}

interface Member {
  queue: string
  events: NotifierEvents
  notifyFromPool: (payload: string) => Promise<unknown>
}

/** The shared connections of this process, by server, credentials and schema. */
const connections = new Map<string, SharedConnection>()

class SharedConnection {
  readonly members = new Set<Member>()
  /** Per queue: the members that advertised and have not withdrawn since (they sleep, and want NOTIFY). */
  private readonly sleepers = new Map<string, Set<Member>>()
  readonly notifier: Notifier
  private starting: Promise<void> | null = null

  constructor(config: pg.ClientConfig, channel: string, schema: string, logger: Logger) {
    const each = (call: (events: NotifierEvents) => void): void => {
      for (const m of [...this.members]) call(m.events)
    }
    this.notifier = new Notifier(
      config,
      channel,
      schema,
      '',
      {
        onNotify: (payload) => each((e) => e.onNotify(payload)),
        onReconnect: () => each((e) => e.onReconnect()),
        onError: (err) => each((e) => e.onError(err)),
      },
      logger,
      // The probe NOTIFY goes out from any member's pool: each reaches the same server and schema.
      (payload) => {
        const member = this.members.values().next().value
        return member === undefined
          ? Promise.reject(new Error('pgonce: no Worker left'))
          : member.notifyFromPool(payload)
      },
    )
  }

  start(): Promise<void> {
    this.starting ??= this.notifier.start()
    return this.starting
  }

  advertise(member: Member): Promise<boolean> {
    let sleeping = this.sleepers.get(member.queue)
    if (sleeping === undefined) this.sleepers.set(member.queue, (sleeping = new Set()))
    sleeping.add(member)
    return this.notifier.advertise(member.queue)
  }

  /** The queue's slot goes back once none of its members sleeps. */
  withdraw(member: Member): void {
    const sleeping = this.sleepers.get(member.queue)
    sleeping?.delete(member)
    if (sleeping === undefined || sleeping.size === 0) {
      this.sleepers.delete(member.queue)
      this.notifier.withdraw(member.queue)
    }
  }

  /** Removes `member`; true when it was the last (the caller ends the connection). */
  leave(member: Member): boolean {
    this.withdraw(member)
    this.members.delete(member)
    return this.members.size === 0
  }
}

/** Settings of a pool, not of its connections (pg-pool's): Workers whose pools differ only in these share. */
const POOL_ONLY = new Set([
  'max',
  'min',
  'poolSize',
  'maxUses',
  'maxLifetimeSeconds',
  'allowExitOnIdle',
  'idleTimeoutMillis',
])

/**
 * The key a connection is shared under: the schema and the connection's settings less its name and its pool's own
 * settings (a Worker's `poolSize` follows its concurrency). A password given as a function cannot be compared: such a
 * Worker gets a connection of its own.
 */
function keyOf(config: pg.ClientConfig, schema: string): string {
  if (typeof config.password === 'function') return `own:${Math.random()}`
  const { application_name: _name, ...rest } = config
  return `${schema}\0${JSON.stringify(rest, (k, v: unknown) => (typeof v === 'function' || POOL_ONLY.has(k) ? undefined : v))}`
}

/**
 * This Worker's part of the process's shared LISTEN connection for `config` and `schema` (made by its first Worker,
 * ended by its last). It joins on start(); its events see every NOTIFY of the schema's channel, as with a connection of
 * its own. The session is named `pgonce-listener <host>:<pid>:shared`.
 */
export function sharedListener(
  config: pg.ClientConfig,
  channel: string,
  schema: string,
  member: Member,
  logger: Logger,
): Listener {
  const key = keyOf(config, schema)
  let joined: SharedConnection | null = null
  let left = false
  const leave = (): SharedConnection | null => {
    const conn = joined
    if (conn === null || left) return null
    left = true
    if (!conn.leave(member)) return null
    if (connections.get(key) === conn) connections.delete(key)
    return conn
  }
  return {
    get pid() {
      return joined?.notifier.pid ?? null
    },
    get listening() {
      return joined?.notifier.listening ?? false
    },
    start() {
      if (left) return Promise.resolve()
      let conn = connections.get(key)
      if (conn === undefined) {
        const name = `pgonce-listener ${hostname().slice(0, 24)}:${process.pid}:shared`
        conn = new SharedConnection({ ...config, application_name: name }, channel, schema, logger)
        connections.set(key, conn)
      }
      joined = conn
      conn.members.add(member)
      return conn.start()
    },
    async stop() {
      await leave()?.notifier.stop()
    },
    abandon() {
      leave()?.notifier.abandon()
    },
    advertise() {
      return joined === null || left ? Promise.resolve(false) : joined.advertise(member)
    },
    withdraw() {
      if (joined !== null && !left) joined.withdraw(member)
    },
  }
}

/** How many shared LISTEN connections this process holds (for tests and metrics). */
export function sharedListenerCount(): number {
  return connections.size
}

/** A Worker's LISTEN connection: shared by the process's Workers (`listen: 'shared'`, the default), or its own (`'own'`). */
export function openListener(
  shared: boolean,
  config: pg.ClientConfig,
  channel: string,
  schema: string,
  queue: string,
  events: NotifierEvents,
  logger: Logger,
  notifyFromPool: (payload: string) => Promise<unknown>,
): Listener {
  return shared
    ? sharedListener(config, channel, schema, { queue, events, notifyFromPool }, logger)
    : new Notifier(config, channel, schema, queue, events, logger, notifyFromPool)
}
