// The pino-compatible logger interface pgonce logs through, its no-op default, and the check of the option.

import { ValidationError } from './errors.js'

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

/** The `logger` option: undefined (silent) or an object with pino's debug/info/warn/error/child methods. */
export function checkLogger(value: unknown, field: string): Logger {
  if (value === undefined) return silentLogger
  const methods = ['debug', 'info', 'warn', 'error', 'child'] as const
  if (
    typeof value !== 'object' ||
    value === null ||
    methods.some((m) => typeof (value as Record<string, unknown>)[m] !== 'function')
  ) {
    throw new ValidationError('INVALID_TYPE', field, `must be a pino-compatible logger (${methods.join(', ')})`)
  }
  return value as Logger
}
