// The bound parameters of the add statements (sql/add-job.sql, sql/add-plain-job.sql, sql/add-jobs.sql, sql/add-plain-jobs.sql) for validated requests.

import type { AddRequest } from './request.js'

const backoffJson = (r: AddRequest): string | null => (r.backoff === null ? null : JSON.stringify(r.backoff))

/** sql/add-job.sql: one add. */
export function addJobParams(queue: string, r: AddRequest): unknown[] {
  return [
    queue,
    r.name,
    r.dataJson,
    r.jobId,
    r.dedupId,
    r.dedupTtlMs,
    r.extend,
    r.replace,
    r.delayMs,
    r.priority,
    r.attempts,
    backoffJson(r),
    r.dependsOn,
    r.traceContext,
    r.runAtMs,
    r.timeoutMs,
    r.groupId,
  ]
}

/** sql/add-plain-job.sql: one plain add. */
export function addPlainJobParams(queue: string, r: AddRequest): unknown[] {
  return [
    queue,
    r.name,
    r.dataJson,
    r.delayMs,
    r.priority,
    r.attempts,
    backoffJson(r),
    r.traceContext,
    r.timeoutMs,
    r.groupId,
  ]
}

/**
 * sql/add-plain-jobs.sql: plain items, one array per column but the data, which goes as one JSON array (each item's
 * data is JSON text already: joined, the server parses it once instead of an array of quoted, escaped strings), and
 * null for a column no item sets. Both measured in bench/DECISIONS.md#plain-bulk.
 */
export function addPlainJobsParams(queue: string, reqs: readonly AddRequest[]): unknown[] {
  const n = reqs.length
  const names = new Array<string>(n)
  const data = new Array<string>(n)
  const delays = new Array<number | null>(n)
  const priorities = new Array<number | null>(n)
  const attempts = new Array<number | null>(n)
  const backoffs = new Array<string | null>(n)
  const traces = new Array<string | null>(n)
  const timeouts = new Array<number | null>(n)
  const groups = new Array<string | null>(n)
  for (let i = 0; i < n; i++) {
    const r = reqs[i] as AddRequest
    names[i] = r.name
    data[i] = r.dataJson
    delays[i] = r.delayMs
    priorities[i] = r.priority
    attempts[i] = r.attempts
    backoffs[i] = backoffJson(r)
    traces[i] = r.traceContext
    timeouts[i] = r.timeoutMs
    groups[i] = r.groupId
  }
  return [
    queue,
    names,
    `[${data.join(',')}]`,
    unlessAllNull(delays),
    unlessAllNull(priorities),
    unlessAllNull(attempts),
    unlessAllNull(backoffs),
    unlessAllNull(traces),
    unlessAllNull(timeouts),
    unlessAllNull(groups),
  ]
}

/** The array, or null when every element is null (unnest pads a null array with nulls). */
function unlessAllNull<T>(values: (T | null)[]): (T | null)[] | null {
  return values.every((v) => v === null) ? null : values
}

/** sql/add-jobs.sql: the items in the caller's order, one array per column. */
export function addJobsParams(queue: string, reqs: readonly AddRequest[]): unknown[] {
  const pick = <T>(f: (r: AddRequest) => T): T[] => reqs.map(f)
  return [
    queue,
    pick((r) => r.name),
    pick((r) => r.dataJson),
    pick((r) => r.jobId),
    pick((r) => r.dedupId),
    pick((r) => r.dedupTtlMs),
    pick((r) => r.extend),
    pick((r) => r.replace),
    pick((r) => r.delayMs),
    pick((r) => r.priority),
    pick((r) => r.attempts),
    pick(backoffJson),
    pick((r) => (r.dependsOn === null ? null : `{${r.dependsOn.join(',')}}`)),
    pick((r) => r.traceContext),
    pick((r) => r.runAtMs),
    pick((r) => r.timeoutMs),
    unlessAllNull(pick((r) => r.groupId)),
  ]
}
