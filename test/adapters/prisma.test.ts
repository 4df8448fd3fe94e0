// Prisma 7 with @prisma/adapter-pg: the client of `prisma.$transaction(async (tx) => …)`. Prisma has no savepoint
// in an interactive transaction, so that test is skipped. The client is generated before the suite runs; `prisma
// generate` needs no engine binary, but the CLI downloads the schema engine (for migrations) unless one is named,
// and only the npm registry is reachable here.

import { execFile } from 'node:child_process'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { PrismaPg } from '@prisma/adapter-pg'
import { type PrismaLike, fromPrisma } from '../../src/index.js'
import { adapterSuite } from './suite.js'

interface PrismaClientLike extends PrismaLike {
  $transaction<T>(fn: (tx: PrismaLike) => Promise<T>, options?: { timeout?: number }): Promise<T>
  $executeRawUnsafe(query: string): Promise<number>
  $disconnect(): Promise<void>
}

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
let prisma: PrismaClientLike

adapterSuite('prisma', {
  async open(url) {
    await promisify(execFile)(
      join(root, 'node_modules', '.bin', 'prisma'),
      ['generate', '--schema', join(root, 'test', 'adapters', 'prisma', 'schema.prisma')],
      { cwd: root, timeout: 60_000, env: { ...process.env, PRISMA_SCHEMA_ENGINE_BINARY: '/bin/false' } },
    )
    const generated = join(root, 'scratch', 'prisma-client', 'client.ts')
    const { PrismaClient } = (await import(generated)) as {
      PrismaClient: new (options: { adapter: unknown }) => PrismaClientLike
    }
    prisma = new PrismaClient({ adapter: new PrismaPg({ connectionString: url, max: 2 }) })
  },
  async close() {
    await prisma?.$disconnect()
  },
  transaction: (fn) => prisma.$transaction((tx) => fn(tx as never), { timeout: 30_000 }),
  exec: (tx, text) => (tx as PrismaClientLike).$executeRawUnsafe(text),
  afterAbort: 'resolves',
  wrap: (tx) => fromPrisma(tx),
})
