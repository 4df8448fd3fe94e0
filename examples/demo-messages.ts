// What the demo and its worker processes tell each other over the IPC channel, and the job data they share.

/** A push job's data: who gets notified of which comment, and which door the event came in by. */
export interface PushData {
  userId: number
  commentId: number
  via: 'web' | 'broker'
}

/** The queue the web tier and the broker feed, and the workers drain. */
export const QUEUE = 'notifications'

/** The ledger key of one push: one per (user, comment, channel), whichever message asked for it (seed, step 1). */
export function effectKey(userId: number, commentId: number): string {
  return `push:${userId}:${commentId}`
}

/** demo.ts → worker: hold the next send open (until killed), and say which one it is. */
export interface HangNextSend {
  type: 'hang-next-send'
}

/** worker → demo. */
export type WorkerMessage =
  | { type: 'ready' }
  | { type: 'sending'; jobId: string; userId: number; commentId: number }
  | { type: 'error'; message: string }
