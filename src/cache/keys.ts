// Names in Redis for the cache layer: the identity of a fact, its bucket (as Postgres computes it), and its keys.

import { createHash } from 'node:crypto'

/** The three kinds of fact the cache holds: a held TTL dedup key, a ledger row, a done runOnce claim. */
export type FactKind = 'k' | 'e' | 'c'

/** How many buckets the epochs are kept for (the rows of `cache_epochs`). */
export const BUCKETS = 256

/** One cacheable fact's identity: what Postgres hashes into a bucket, and the tail of its Redis key. */
export interface Fact {
  kind: FactKind
  /** `'k <queue> <key>'`, `'e <key>'` or `'c <key>'`: the text `_cache_bucket()` hashes in the migration. */
  ident: string
  bucket: number
  /** The entry's name after its epoch: kind, the queue for a dedup key, and the key hashed (any text is safe). */
  tail: string
}

function sha256(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest()
}

/** A dedup key of a queue. Queue names are allow-listed and contain no space, so the identity is unambiguous. */
export function dedupFact(queue: string, key: string): Fact {
  return fact('k', `k ${queue} ${key}`, `k:${queue}:`)
}

/** An effect key of the processed_effects ledger. */
export function ledgerFact(key: string): Fact {
  return keyFact('e', key)
}

/** A runOnce key of execution_claims. */
export function claimFact(key: string): Fact {
  return keyFact('c', key)
}

function keyFact(kind: 'e' | 'c', key: string): Fact {
  return fact(kind, `${kind} ${key}`, `${kind}:`)
}

/** One SHA-256 of the identity: its first byte is the bucket (`_cache_bucket()`, baseline migration), 160 bits name it. */
function fact(kind: FactKind, ident: string, prefix: string): Fact {
  const digest = sha256(ident)
  return { kind, ident, bucket: digest[0] as number, tail: `${prefix}${digest.subarray(0, 20).toString('base64url')}` }
}

/**
 * The Redis keys of one schema of one database: `pgonce:{<schema>:<bucket>}:<instance>:…`, where the instance is
 * `settings.cache_instance`, drawn at random when the schema was created, so that two databases sharing a Redis and a
 * schema name never read each other's keys. The keys of a bucket share the hash tag, for the one MGET of a pre-check.
 */
export class KeyNames {
  constructor(
    private readonly schema: string,
    private readonly instance: string,
  ) {}

  private tag(bucket: number): string {
    return `pgonce:{${this.schema}:${bucket}}:${this.instance}`
  }

  /** The newest epoch of the bucket any process copied from Postgres. */
  epoch(bucket: number): string {
    return `${this.tag(bucket)}:epoch`
  }

  /** A counter of calls through pgonce ending a fact of the bucket right now: while above 0, its pre-checks miss. */
  hold(bucket: number): string {
    return `${this.tag(bucket)}:hold`
  }

  /** The entry of a fact under an epoch of its bucket. */
  entry(fact: Fact, epoch: number): string {
    return `${this.tag(fact.bucket)}:${epoch}:${fact.tail}`
  }

  /** When the Postgres server this schema lives on started, as the processes last saw it (restart and restore detection). */
  server(): string {
    return `pgonce:{${this.schema}}:${this.instance}:server`
  }
}
