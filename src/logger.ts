// The pino-compatible logger interface pgonce logs through, and its no-op default.

type LogFn = (obj: object | string, msg?: string) => void

/** Any pino-compatible logger (pino itself, or an adapter). */
export interface Logger {
  debug: LogFn
  info: LogFn
  warn: LogFn
  error: LogFn
  child(bindings: Record<string, unknown>): Logger
}

const noop: LogFn = () => {}

/** Logs nothing; the default. */
export const silentLogger: Logger = {
  debug: noop,
  info: noop,
  warn: noop,
  error: noop,
  child: () => silentLogger,
}
