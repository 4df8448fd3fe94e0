// What the CLI prints: aligned tables, key: value lines, one-line JSON, and errors as one line with an exit code.

import Table from 'cli-table3'
import { CommanderError } from 'commander'
import { ValidationError } from '../errors.js'

/** Exit codes (docs/cli.md): 0 ok, 1 failure (not found, refused, database), 2 usage (bad arguments). */
export const EXIT_FAILURE = 1
export const EXIT_USAGE = 2

/** An error the CLI reports as one line on stderr, ending with `exitCode`. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: typeof EXIT_FAILURE | typeof EXIT_USAGE,
  ) {
    super(message)
  }
}

/** A failure: not found, refused, unreachable (exit 1). */
export function failure(message: string): CliError {
  return new CliError(message, EXIT_FAILURE)
}

/** A usage error: bad arguments or configuration (exit 2). */
export function usage(message: string): CliError {
  return new CliError(message, EXIT_USAGE)
}

/** A timestamp to the second, in UTC: fixed width, so table columns stay aligned. */
export function time(value: Date): string {
  return value.toISOString().replace(/\.\d{3}Z$/, 'Z')
}

/** A value as text: `-` for none, timestamps to the second, anything structured as compact JSON. */
export function text(value: unknown): string {
  if (value === null || value === undefined) return '-'
  if (value instanceof Date) return time(value)
  if (typeof value === 'string') return value
  return JSON.stringify(value)
}

/** The first line of a message, cut to `max` characters: for a table cell. */
export function brief(value: string | null, max = 60): string {
  if (value === null) return '-'
  const line = value.split('\n', 1)[0] as string
  return line.length > max ? `${line.slice(0, max - 1)}…` : line
}

const BORDERLESS = {
  top: '',
  'top-mid': '',
  'top-left': '',
  'top-right': '',
  bottom: '',
  'bottom-mid': '',
  'bottom-left': '',
  'bottom-right': '',
  left: '',
  'left-mid': '',
  mid: '',
  'mid-mid': '',
  right: '',
  'right-mid': '',
  middle: '  ',
}

/** A table with a header row, columns two spaces apart; `numeric` columns are right-aligned. */
export function table(head: string[], rows: unknown[][], numeric: number[] = []): string {
  const t = new Table({
    head,
    chars: BORDERLESS,
    style: { 'padding-left': 0, 'padding-right': 0, head: [], border: [] },
    colAligns: head.map((_, i) => (numeric.includes(i) ? 'right' : 'left')),
  })
  t.push(...rows.map((row) => row.map(text)))
  return `${t
    .toString()
    .split('\n')
    .map((line) => line.trimEnd())
    .join('\n')}\n`
}

/** `key: value` lines with the values aligned; a value of several lines continues indented. */
export function keyValues(pairs: [string, unknown][]): string {
  const width = Math.max(...pairs.map(([key]) => key.length)) + 2
  return pairs
    .map(([key, value]) => `${`${key}:`.padEnd(width)}${text(value).replace(/\n/g, `\n${' '.repeat(width)}`)}\n`)
    .join('')
}

/** Prints `value` as one line of JSON with `--json`, else what `render` makes of it. */
export function emit(json: boolean | undefined, value: unknown, render: () => string): void {
  process.stdout.write(json === true ? `${JSON.stringify(value)}\n` : render())
}

/** Prints `err` as one line on stderr (commander printed its own) and returns the exit code it stands for. */
export function reportError(err: unknown): number {
  if (err instanceof CommanderError) return err.exitCode === 0 ? 0 : EXIT_USAGE
  const code = err instanceof CliError ? err.exitCode : err instanceof ValidationError ? EXIT_USAGE : EXIT_FAILURE
  const message = err instanceof Error ? err.message : String(err)
  process.stderr.write(`error: ${message.split('\n', 1)[0]}\n`)
  return code
}
