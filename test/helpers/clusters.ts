// Extra PostgreSQL clusters of a test's own (Debian's postgresql-common), for the tests that restart a server.

import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { freePort, waitForPort } from './ports.js'
import { commandPath } from './processes.js'

const execFileAsync = promisify(execFile)

export interface Cluster {
  name: string
  port: number
  /** Connection string of the cluster's `postgres` database. */
  url: string
  /** `pg_ctlcluster 15 NAME restart -m immediate` (a crash and recovery). */
  restartImmediate(): Promise<void>
  /** Stops and drops the cluster (idempotent). */
  drop(): Promise<void>
}

/** Why no cluster of the test's own can be made here, or null if one can (pg_createcluster as root or postgres). */
export async function clusterUnavailable(): Promise<string | null> {
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

/** Creates and starts cluster 15/`name` on a free port with trust authentication. */
export async function createCluster(label: string): Promise<Cluster> {
  const name = `${label}${process.pid}${Math.floor(Math.random() * 1e4)}`
  const port = await freePort()
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
