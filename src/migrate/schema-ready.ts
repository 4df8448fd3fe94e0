// Migrates a schema on first use, once per object; a failed attempt is tried again by the next call.

import type pg from 'pg'
import type { Logger } from '../logger.js'
import { migrate } from './runner.js'

export class SchemaReady {
  private pending: Promise<void> | undefined

  /** `enabled: false` (the `migrate: false` option) makes `ensure()` a no-op. */
  constructor(
    private readonly pool: pg.Pool,
    private readonly schema: string,
    private readonly logger: Logger,
    enabled: boolean,
  ) {
    if (!enabled) this.pending = Promise.resolve()
  }

  /** Resolves once the schema is migrated; a failure (database down, lock timeout) is not remembered. */
  ensure(): Promise<void> {
    this.pending ??= migrate({ pool: this.pool, schema: this.schema, logger: this.logger }).then(
      () => {},
      (err: unknown) => {
        this.pending = undefined
        throw err
      },
    )
    return this.pending
  }

  /** Waits for a migration in flight, ignoring its outcome (before ending the pool). */
  async settle(): Promise<void> {
    await this.pending?.catch(() => {})
  }
}
