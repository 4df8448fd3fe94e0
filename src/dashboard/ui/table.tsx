// A view's table (stacked into cards on a phone by app.css) and its keyset pager.
import type { ComponentChildren, JSX } from 'preact'
import { href } from './route.js'

export interface TableProps<T> {
  /** Column heads: a name, or an element (a select-all checkbox). */
  columns: ComponentChildren[]
  rows: T[]
  /** False until the first answer: nothing is shown (the loading line is). */
  loaded: boolean
  /** What an empty answer reads as. */
  empty: ComponentChildren
  row: (item: T) => JSX.Element
}

export function Table<T>({ columns, rows, loaded, empty, row }: TableProps<T>): JSX.Element | null {
  if (!loaded) return null
  if (rows.length === 0) return <p class="muted">{empty}</p>
  return (
    <div class="table-wrap">
      <table class="stack">
        <thead>
          <tr>
            {columns.map((column, index) => (
              <th scope="col" key={index}>
                {column}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>{rows.map(row)}</tbody>
      </table>
    </div>
  )
}

/** "First page" while on a later one, "Next page" while the answer has a `next` cursor. */
export function Pager(props: {
  view: string
  params: Record<string, string | undefined>
  after: string | undefined
  next: string | null | undefined
}): JSX.Element {
  return (
    <nav class="pager" aria-label="Pages">
      {props.after && <a href={href(props.view, props.params)}>First page</a>}
      {props.next && <a href={href(props.view, { ...props.params, after: props.next })}>Next page</a>}
    </nav>
  )
}
