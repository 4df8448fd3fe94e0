// The comment events the demo fires, planned up front from a seeded PRNG: posts, and the seed guide's three kinds of duplicates.

export type EventKind = 'post' | 'retry' | 'edit' | 'redelivery'

export const EVENT_KINDS: readonly EventKind[] = ['post', 'retry', 'edit', 'redelivery']

export interface CommentEvent {
  kind: EventKind
  /** Who gets the push: the author of the post that was commented on. */
  userId: number
  commentId: number
  /** The web request's or broker message's id, used as the job's `jobId`. */
  messageId: string
  /** For an edit: which edit of the comment (1, 2, …). */
  edit: number
}

export interface EventPlan {
  /** What the web tier fires, in order: each comment's post, then (a little later) its retried requests and edits. */
  web: CommentEvent[]
  /** What the broker delivers again, once the jobs of the first deliveries have run. */
  broker: CommentEvent[]
  /** Every (user, comment) that must be notified, once. */
  comments: { userId: number; commentId: number }[]
}

/** Shares of the events: most are first posts; the rest are duplicates of them. */
const SHARE = { retry: 0.17, edit: 0.13, redelivery: 0.1 } as const
/** A retried request follows its post within this many web events (it is sent again on a timeout); an edit, within MAX_EDIT_LAG. */
const MAX_RETRY_LAG = 3
const MAX_EDIT_LAG = 40

/** mulberry32: small, fast and the same on every machine, so a seed replays a run. */
function prng(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296
  }
}

export function planEvents(total: number, users: number, seed: number): EventPlan {
  const random = prng(seed)
  const pick = (n: number): number => Math.floor(random() * n)
  const retries = Math.round(total * SHARE.retry)
  const edits = Math.round(total * SHARE.edit)
  const redeliveries = Math.round(total * SHARE.redelivery)
  const posts = total - retries - edits - redeliveries

  const comments = Array.from({ length: posts }, (_, i) => ({ userId: 1 + pick(users), commentId: i + 1 }))
  // The post request's id: a retried request carries it again, and so does the broker's copy of that event.
  const postId = (commentId: number): string => `comment-posted:${commentId}`
  const placed: { at: number; event: CommentEvent }[] = comments.map((c, i) => ({
    at: i,
    event: { kind: 'post', ...c, messageId: postId(c.commentId), edit: 0 },
  }))
  const editsSoFar = new Map<number, number>()
  const duplicate = (kind: 'retry' | 'edit'): void => {
    const i = pick(posts)
    const c = comments[i] as { userId: number; commentId: number }
    const edit = kind === 'edit' ? (editsSoFar.get(c.commentId) ?? 0) + 1 : 0
    if (kind === 'edit') editsSoFar.set(c.commentId, edit)
    const messageId = kind === 'edit' ? `comment-edited:${c.commentId}:${edit}` : postId(c.commentId)
    // Half a step past a whole lag: a duplicate never sorts before (or ties with) its post.
    placed.push({
      at: i + 1 + pick(kind === 'edit' ? MAX_EDIT_LAG : MAX_RETRY_LAG) + 0.5,
      event: { kind, ...c, messageId, edit },
    })
  }
  for (let n = 0; n < retries; n++) duplicate('retry')
  for (let n = 0; n < edits; n++) duplicate('edit')
  placed.sort((a, b) => a.at - b.at)

  const broker: CommentEvent[] = []
  for (let n = 0; n < redeliveries; n++) {
    const c = comments[pick(posts)] as { userId: number; commentId: number }
    broker.push({ kind: 'redelivery', ...c, messageId: postId(c.commentId), edit: 0 })
  }
  return { web: placed.map((p) => p.event), broker, comments }
}
