// The opaque keyset cursors of the list routes: the sort key of a page's last row, as text, in base64url JSON.

import { badRequest } from './http-error.js'

/** Encodes the sort key of the last row (`kind` keeps a cursor of one list from being read by another). */
export function encodeCursor(kind: string, key: readonly string[]): string {
  return Buffer.from(JSON.stringify([kind, ...key]), 'utf8').toString('base64url')
}

/** Decodes `after` for list `kind`: its `size` key parts, or null without a cursor; a foreign or bad one is 400. */
export function decodeCursor(value: string | undefined, kind: string, size: number): string[] | null {
  if (value === undefined || value === '') return null
  let parsed: unknown
  try {
    parsed = JSON.parse(Buffer.from(value, 'base64url').toString('utf8'))
  } catch {
    throw badRequest('after: not a cursor of this list (take `next` from the previous page)')
  }
  if (
    !Array.isArray(parsed) ||
    parsed.length !== size + 1 ||
    parsed[0] !== kind ||
    !parsed.every((p) => typeof p === 'string' && p.length <= 1_000)
  ) {
    throw badRequest('after: not a cursor of this list (take `next` from the previous page)')
  }
  return (parsed as string[]).slice(1)
}
