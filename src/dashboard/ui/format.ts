// How times, durations and JSON read on the dashboard.

/** `3 min ago` / `in 2 h` from an ISO time, against the browser's clock. */
export function relative(iso: string, now = Date.now()): string {
  const ms = Date.parse(iso) - now
  const text = duration(Math.abs(ms))
  return ms >= 0 ? `in ${text}` : `${text} ago`
}

/** A short duration: `850 ms`, `12 s`, `5 min`, `3 h`, `2 d`. */
export function duration(ms: number): string {
  if (ms < 1_000) return `${Math.round(ms)} ms`
  if (ms < 60_000) return `${Math.round(ms / 1_000)} s`
  if (ms < 3_600_000) return `${Math.round(ms / 60_000)} min`
  if (ms < 86_400_000) return `${Math.round(ms / 3_600_000)} h`
  return `${Math.round(ms / 86_400_000)} d`
}

/** A local date and time to the second, for a tooltip or a table cell. */
export function stamp(iso: string): string {
  const date = new Date(iso)
  return Number.isNaN(date.getTime()) ? iso : date.toLocaleString(undefined, { hour12: false })
}

/** Pretty JSON; `undefined` reads as `null`. */
export function json(value: unknown): string {
  return JSON.stringify(value ?? null, null, 2)
}
