// What every transaction adapter reduces an ORM's handle to: one function that runs a statement with `$1…$n`
// parameters and resolves to plain rows, as node-postgres would give them.

const ADAPTER = Symbol.for('pgonce.adapter')

/** Runs one statement (pgonce's `$1…$n` text, never a named statement) and resolves to its rows. */
export type RunStatement = (text: string, values: readonly unknown[]) => Promise<Record<string, unknown>[]>

/**
 * A caller's transaction, wrapped by one of {@link fromDrizzle}, {@link fromPrisma}, {@link fromPostgresJs},
 * {@link fromKnex} or {@link fromTypeORM}. Pass it as `tx` wherever pgonce takes one.
 */
export interface TransactionAdapter {
  /** Which library it wraps (for error messages). */
  readonly library: string
  /** @internal */
  readonly [ADAPTER]: RunStatement
}

export function adapter(library: string, run: RunStatement): TransactionAdapter {
  return Object.freeze({ library, [ADAPTER]: run })
}

/** The statement runner of a wrapped transaction, or undefined when `tx` is not one. */
export function runnerOf(tx: object): RunStatement | undefined {
  const run = (tx as Partial<Record<typeof ADAPTER, unknown>>)[ADAPTER]
  return typeof run === 'function' ? (run as RunStatement) : undefined
}

/** A property of an unknown object, without trusting its type. */
export function prop(value: unknown, key: string): unknown {
  return (typeof value === 'object' || typeof value === 'function') && value !== null
    ? (value as Record<string, unknown>)[key]
    : undefined
}

export function isFunction(value: unknown): value is (...args: never[]) => unknown {
  return typeof value === 'function'
}
