import { spawn } from 'node:child_process'
import { dirname, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import pg from 'pg'
import { describe, expect, inject, it } from 'vitest'
import { createDatabase } from '../dev/postgres-server.js'

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..')

describe('test infrastructure', () => {
  it('provides a reachable databaseUrl', async () => {
    const url = inject('databaseUrl')
    expect(url).toMatch(/^postgres(ql)?:\/\//)
    const client = new pg.Client({ connectionString: url })
    await client.connect()
    try {
      const { rows } = await client.query<{ one: number }>('select 1 as one')
      expect(rows).toEqual([{ one: 1 }])
    } finally {
      await client.end()
    }
  })

  it('createDatabase (re)creates a database and returns its url', async () => {
    const name = `pgonce_infra_${process.pid}`
    const dbUrl = await createDatabase(inject('databaseUrl'), name)
    expect(new URL(dbUrl).pathname).toBe(`/${name}`)
    // Second call must drop & recreate without error.
    const again = await createDatabase(inject('databaseUrl'), name)
    expect(again).toBe(dbUrl)
    const client = new pg.Client({ connectionString: dbUrl })
    await client.connect()
    try {
      const { rows } = await client.query<{ db: string }>('select current_database() as db')
      expect(rows[0]?.db).toBe(name)
    } finally {
      await client.end()
    }
    // Clean up (connect to the original database to drop it).
    const admin = new pg.Client({ connectionString: inject('databaseUrl') })
    await admin.connect()
    try {
      await admin.query(`drop database if exists ${admin.escapeIdentifier(name)} with (force)`)
    } finally {
      await admin.end()
    }
  })

  it('startPostgres() works without DATABASE_URL (container or embedded fallback)', async () => {
    const script = `
        import pg from 'pg';
        import { startPostgres } from './dev/postgres-server.ts';
        import { pgbouncerBinary, startPgbouncer } from './test/helpers/pgbouncer.ts';
        const t0 = Date.now();
        const server = await startPostgres((m) => process.stderr.write(m + '\\n'));
        const startMs = Date.now() - t0;
        let version;
        let throughBouncer = 'no pgbouncer';
        try {
          const client = new pg.Client({ connectionString: server.url });
          await client.connect();
          try {
            version = (await client.query('select version() as v')).rows[0].v;
          } finally {
            await client.end();
          }
          // The PgBouncer tests' bouncer in front of this server, which asks for a password.
          const binary = await pgbouncerBinary();
          if (binary) {
            const bouncer = await startPgbouncer(binary, server.url, 1);
            try {
              const viaBouncer = new pg.Client({ connectionString: bouncer.url });
              viaBouncer.on('error', () => {});
              try {
                await viaBouncer.connect();
                throughBouncer = (await viaBouncer.query('select 1 as one')).rows[0].one === 1 ? 'ok' : 'wrong answer';
              } catch (err) {
                throughBouncer = 'failed: ' + err.message;
              } finally {
                await viaBouncer.end().catch(() => {});
              }
            } finally {
              await bouncer.stop();
            }
          }
        } finally {
          await server.stop();
        }
        process.stdout.write(JSON.stringify({ kind: server.kind, version, startMs, throughBouncer }) + '\\n');
      `
    const env: NodeJS.ProcessEnv = { ...process.env }
    delete env.DATABASE_URL
    delete env.PGONCE_TEST_POSTGRES

    const { code, stdout, stderr } = await new Promise<{ code: number | null; stdout: string; stderr: string }>(
      (done, fail) => {
        const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
          cwd: repoRoot,
          env,
          stdio: ['ignore', 'pipe', 'pipe'],
        })
        let out = ''
        let err = ''
        child.stdout.on('data', (c: Buffer) => (out += c.toString()))
        child.stderr.on('data', (c: Buffer) => (err += c.toString()))
        child.on('error', fail)
        child.on('close', (exitCode) => done({ code: exitCode, stdout: out, stderr: err }))
      },
    )

    expect(code, `child failed.\nstdout:\n${stdout}\nstderr:\n${stderr}`).toBe(0)
    const lastLine = stdout.trim().split('\n').pop() ?? ''
    const result = JSON.parse(lastLine) as { kind: string; version: string; startMs: number; throughBouncer: string }
    expect(['embedded', 'testcontainers']).toContain(result.kind)
    expect(result.version).toMatch(/^PostgreSQL 15\./)
    // Where pgbouncer is installed (CI installs it), the PgBouncer tests' bouncer reaches this server too: it must
    // log in with the server's password (it once sent an empty one, and all six PgBouncer tests failed here).
    if (process.env.REQUIRE_PGBOUNCER === '1') expect(result.throughBouncer).toBe('ok')
    else expect(['ok', 'no pgbouncer']).toContain(result.throughBouncer)
    console.log(
      `startPostgres fallback: kind=${result.kind} startup=${result.startMs}ms, through pgbouncer: ${result.throughBouncer}`,
    )
  }, 180_000)
})
