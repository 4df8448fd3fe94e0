// The Lua the cache layer runs in Redis, one call for many keys: epoch keys only ever rise; holds count the calls in flight.

import type { RedisLike } from './redis-client.js'

/** Raises each epoch key KEYS[i] to ARGV[i] unless it holds a newer one: a copy sent late never lowers it. */
const RAISE_EPOCHS = `for i = 1, #KEYS do
  local cur = tonumber(redis.call('GET', KEYS[i]) or '0') or 0
  if tonumber(ARGV[i]) > cur then redis.call('SET', KEYS[i], ARGV[i]) end
end
return #KEYS`

/** One more call ending a fact of each bucket; a hold expires by itself after ARGV[1] ms (a crashed caller). */
const HOLD = `for i = 1, #KEYS do
  redis.call('INCR', KEYS[i])
  redis.call('PEXPIRE', KEYS[i], ARGV[1])
end
return #KEYS`

/** One call fewer; a hold goes at zero. */
const RELEASE = `for i = 1, #KEYS do
  if redis.call('DECR', KEYS[i]) <= 0 then redis.call('DEL', KEYS[i]) end
end
return #KEYS`

export function raiseEpochs(client: RedisLike, keys: readonly string[], epochs: readonly number[]): Promise<unknown> {
  return client.eval(RAISE_EPOCHS, keys.length, ...keys, ...epochs.map(String))
}

export function hold(client: RedisLike, keys: readonly string[], ms: number): Promise<unknown> {
  return client.eval(HOLD, keys.length, ...keys, ms)
}

export function release(client: RedisLike, keys: readonly string[]): Promise<unknown> {
  return client.eval(RELEASE, keys.length, ...keys)
}
