// Extra PostgreSQL clusters of a test's own (Debian's postgresql-common), for the tests that restart a server. Under
// the version matrix (test/compat/run.ts) PGONCE_PG_BIN names the bin directory of the version under test, and the
// cluster is a server of those binaries instead (test/compat/pg-binaries.ts).

import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { startFromBinaries } from '../compat/pg-binaries.js'
import { freePort, waitForPort } from './ports.js'
import { commandPath } from './processes.js'

const execFileAsync = promisify(execFile)

export interface Cluster {
  name: string
  port: number
  /** Connection string of the cluster's `postgres` database. */
  url: string
  /** `pg_ctlcluster 15 NAME restart -m immediate` (a crash and recovery), or `pg_ctl restart -m immediate`. */
  restartImmediate(): Promise<void>
  /** Stops and drops the cluster (idempotent). */
  drop(): Promise<void>
}

/** Why no cluster of the test's own can be made here, or null if one can (pg_createcluster as root or postgres). */
export async function clusterUnavailable(): Promise<string | null> {
  if (process.env.PGONCE_PG_BIN) return null
  if ((await commandPath('pg_createcluster')) === null)
    return 'pg_createcluster is not installed (e.g. the embedded server is in use)'
  if ((await commandPath('pg_ctlcluster')) === null) return 'pg_ctlcluster is not installed'
  const uid = process.getuid?.()
  if (uid !== 0) {
    const { stdout } = await execFileAsync('id', ['-un']).catch(() => ({ stdout: '' }))
    if (stdout.trim() !== 'postgres') return 'pg_createcluster needs root or the postgres user'
  }
  return null
}

/** Creates and starts cluster 15/`name` (or a server of PGONCE_PG_BIN) on a free port with trust authentication. */
export async function createCluster(label: string): Promise<Cluster> {
  const name = `${label}${process.pid}${Math.floor(Math.random() * 1e4)}`
  const port = await freePort()
  const bin = process.env.PGONCE_PG_BIN
  if (bin) {
    const server = await startFromBinaries(bin, port)
    return { name, port, url: server.url, restartImmediate: server.restartImmediate, drop: server.stop }
  }
  await execFileAsync(
    'pg_createcluster',
    [
      '15',
      name,
      '--port',
      String(port),
      '--start',
      '-o',
      'fsync=off',
      '-o',
      'max_connections=200',
      '--',
      '--auth=trust',
    ],
    { timeout: 60_000 },
  )
  let dropped = false
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`
  await waitForPort(port, 20_000)
  return {
    name,
    port,
    url,
    async restartImmediate() {
      await execFileAsync('pg_ctlcluster', ['15', name, 'restart', '-m', 'immediate'], { timeout: 60_000 })
    },
    async drop() {
      if (dropped) return
      dropped = true
      await execFileAsync('pg_dropcluster', ['15', name, '--stop'], { timeout: 60_000 }).catch(async () => {
        await execFileAsync('pg_ctlcluster', ['15', name, 'stop', '-m', 'immediate']).catch(() => {})
        await execFileAsync('pg_dropcluster', ['15', name]).catch(() => {})
      })
    },
  }
}
