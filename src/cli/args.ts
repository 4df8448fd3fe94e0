// Argument parsers and shared options of the CLI: each checks before any I/O, and a bad value is a usage error (exit 2).

import { InvalidArgumentError, Option } from 'commander'
import { checkQueueName } from '../db/identifiers.js'
import { ValidationError } from '../errors.js'
import { JOB_STATES, type JobState } from '../job.js'
import { checkJobIdRef, checkText } from '../validate.js'

/** Turns a pgonce check into a commander parser: a ValidationError becomes commander's "argument is invalid". */
function parser<T>(check: (value: string) => T): (value: string) => T {
  return (value) => {
    try {
      return check(value)
    } catch (err) {
      if (!(err instanceof ValidationError)) throw err
      throw new InvalidArgumentError(err.message.slice(err.field.length + 2))
    }
  }
}

export const parseQueue = parser((value) => checkQueueName(value, 'queue'))
export const parseJobId = parser((value) => checkJobIdRef(value, 'id'))
export const parseKey = parser((value) => checkText(value, 'key'))

/** A whole number in [min, max]. */
export function parseInteger(min: number, max: number): (value: string) => number {
  return (value) => {
    const n = Number(value)
    if (!/^\d+$/.test(value) || n < min || n > max)
      throw new InvalidArgumentError(`must be a whole number from ${min} to ${max}`)
    return n
  }
}

/** A number of seconds above 0 (fractions allowed), at most an hour. */
export function parseSeconds(value: string): number {
  const n = Number(value)
  if (!/^\d+(\.\d+)?$/.test(value) || n <= 0 || n > 3600)
    throw new InvalidArgumentError('must be a number of seconds above 0, at most 3600')
  return n
}

/** One or more job states (repeated, or comma-separated), collected into one list. */
export function parseStates(value: string, previous: JobState[] | undefined): JobState[] {
  const states = value.split(',').map((s) => {
    if (!JOB_STATES.includes(s as JobState)) throw new InvalidArgumentError(`must be one of ${JOB_STATES.join(', ')}`)
    return s as JobState
  })
  return [...(previous ?? []), ...states]
}

/** Job ids of a variadic argument, collected into one list. */
export function parseJobIds(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), parseJobId(value)]
}

/** `--queue <name>`, required. */
export function queueOption(): Option {
  return new Option('--queue <name>', 'the queue').argParser(parseQueue).makeOptionMandatory()
}

/** `--json`: print one line of JSON (shapes in docs/cli.md). */
export function jsonOption(): Option {
  return new Option('--json', 'print JSON (shapes in docs/cli.md)')
}
