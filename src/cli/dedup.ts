// `pgonce dedup get|remove KEY --queue Q`: who holds a dedup key, and releasing it so that the next add proceeds.

import type { Command } from 'commander'
import { parseKey } from './args.js'
import { itemCommand } from './connect.js'
import { emit, failure, keyValues } from './output.js'

const KEY = { name: 'key', description: 'the deduplication key', parse: parseKey }

export function registerDedup(program: Command): void {
  const dedup = program.command('dedup').description('look up or release a deduplication key')

  itemCommand(
    dedup,
    'get',
    'the job holding a key (exit 1 when the key is not held)',
    KEY,
    async (queue, key, opts) => {
      const ownerId = await queue.getDeduplicationJobId(key)
      if (ownerId === null) throw failure(`key '${key}' is not held in queue ${opts.queue}`)
      const held = { queue: opts.queue, key, ownerId }
      emit(opts.json, held, () => keyValues(Object.entries(held)))
    },
  )

  itemCommand(
    dedup,
    'remove',
    'delete a key whoever holds it, so that the next add proceeds (exit 1 when it was not held)',
    KEY,
    async (queue, key, opts) => {
      const removed = await queue.removeDeduplicationKey(key)
      if (!removed) throw failure(`key '${key}' is not held in queue ${opts.queue}: nothing removed`)
      emit(opts.json, { queue: opts.queue, key, removed }, () => `key '${key}' of queue ${opts.queue}: removed\n`)
    },
  )
}
