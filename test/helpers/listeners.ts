// A Worker's LISTEN session found as an operator would, by its application_name: the shared one of its process
// (`pgonce-listener <host>:<pid>:shared`, the default) or a Worker's own (`pgonce-listener <worker id>`, listen: 'own').

import type { TestSchema } from './schema.js'

/** The application_name of the shared LISTEN session of the process that runs the Worker `workerId` (<host>:<pid>:<hex>). */
export function sharedListenerName(workerId: string): string {
  return `pgonce-listener ${workerId.replace(/:[0-9a-f]+$/, ':shared')}`
}

/** The backend pids of the sessions named `name`, as the server sees them. */
export async function sessionsNamed(db: TestSchema, name: string): Promise<number[]> {
  const { rows } = await db.pool.query<{ pid: number }>(
    'select pid from pg_stat_activity where application_name = $1 order by pid',
    [name],
  )
  return rows.map((r) => r.pid)
}
