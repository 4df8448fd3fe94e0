// Transaction adapters: the ORMs' transaction handles pgonce accepts as `tx`, each reduced to one statement runner.
// Recognised structurally by executorFor (src/db/executor.ts), or wrapped by name (`fromDrizzle(tx)`…).

import { type RunStatement, runnerOf } from './adapter.js'
import { type DrizzleLike, drizzleRunner, isDrizzle } from './drizzle.js'
import { type KnexLike, isKnex, knexRunner } from './knex.js'
import { type PostgresJsLike, isPostgresJs, postgresJsRunner } from './postgres-js.js'
import { type PrismaLike, isPrisma, prismaRunner } from './prisma.js'
import { type TypeORMLike, isTypeORM, typeormRunner } from './typeorm.js'

export type { RunStatement, TransactionAdapter } from './adapter.js'
export { fromDrizzle, type DrizzleLike } from './drizzle.js'
export { fromKnex, type KnexLike } from './knex.js'
export { fromPostgresJs, type PostgresJsLike } from './postgres-js.js'
export { fromPrisma, type PrismaLike } from './prisma.js'
export { fromTypeORM, type TypeORMLike } from './typeorm.js'

/** An ORM's transaction handle that pgonce recognises by its shape. */
export type OrmTransaction = DrizzleLike | PrismaLike | PostgresJsLike | KnexLike | TypeORMLike

/**
 * The runner for a wrapped `tx` or an ORM handle recognised by its shape, or undefined for anything else (pg and
 * Kysely are executor.ts's own). Each test is specific to one library: TypeORM's manager is checked before the
 * others because it has a `query` method like pg's, which takes other arguments.
 */
export function adapterRunner(tx: object): RunStatement | undefined {
  const wrapped = runnerOf(tx)
  if (wrapped !== undefined) return wrapped
  if (isTypeORM(tx)) return typeormRunner(tx)
  if (isPostgresJs(tx)) return postgresJsRunner(tx)
  if (isKnex(tx)) return knexRunner(tx)
  if (isPrisma(tx)) return prismaRunner(tx)
  if (isDrizzle(tx)) return drizzleRunner(tx)
  return undefined
}
