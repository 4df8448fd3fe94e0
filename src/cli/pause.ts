// `pgonce pause QUEUE` and `pgonce resume QUEUE`: every worker of the queue stops or starts claiming; a queue never
// seen is refused unless `--create`, so that a typo does not pause a queue of its own.

import type { Command } from 'commander'
import { sqlFor } from '../db/sql-files.js'
import { jsonOption, parseQueue } from './args.js'
import { type Db, withDb } from './connect.js'
import { emit, failure } from './output.js'

/** How many known queue names the refusal lists. */
const LISTED = 20

/** Throws unless `queue` has a job, a settings row or a scheduler. */
async function checkKnown(db: Db, queue: string, verb: string): Promise<void> {
  const { rows } = await db.pool.query<{ queue: string }>(sqlFor('known-queues', db.schema))
  const names = rows.map((r) => r.queue)
  if (names.includes(queue)) return
  const listed =
    names.length === 0
      ? 'none'
      : `${names.slice(0, LISTED).join(', ')}${names.length > LISTED ? `, … (${names.length - LISTED} more)` : ''}`
  throw failure(
    `queue ${queue} was never seen in schema ${db.schema} (no job, setting or scheduler); ` +
      `known queues: ${listed}; give --create to ${verb} it anyway`,
  )
}

export function registerPause(program: Command): void {
  for (const paused of [true, false]) {
    const verb = paused ? 'pause' : 'resume'
    program
      .command(verb)
      .description(
        paused
          ? 'stop the workers of a queue from claiming (they finish what they hold; adds are still accepted)'
          : 'let the workers of a queue claim again',
      )
      .argument('<queue>', 'the queue', parseQueue)
      .option('--create', `${verb} a queue that has no job, setting or scheduler yet`)
      .addOption(jsonOption())
      .action((queue: string, opts: { json?: boolean; create?: boolean }, cmd: Command) =>
        withDb(cmd, async (db) => {
          if (opts.create !== true) await checkKnown(db, queue, verb)
          await (paused ? db.queue(queue).pause() : db.queue(queue).resume())
          emit(opts.json, { queue, paused }, () => `queue ${queue}: ${paused ? 'paused' : 'resumed'}\n`)
        }),
      )
  }
}
