// A first-in first-out buffer with O(1) shift, for the worker's claimed-but-unstarted jobs.

export class Fifo<T> {
  private items: (T | undefined)[] = []
  private head = 0

  get length(): number {
    return this.items.length - this.head
  }

  push(item: T): void {
    this.items.push(item)
  }

  shift(): T | undefined {
    if (this.head >= this.items.length) return undefined
    const item = this.items[this.head]
    this.items[this.head++] = undefined
    if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head)
      this.head = 0
    }
    return item
  }

  /** The first item, left in place. */
  peek(): T | undefined {
    return this.items[this.head]
  }

  /** Puts an item back at the front. */
  unshift(item: T): void {
    if (this.head > 0) this.items[--this.head] = item
    else this.items.unshift(item)
  }

  /** Empties the buffer, returning what it held in order. */
  drain(): T[] {
    const rest = this.items.slice(this.head) as T[]
    this.items = []
    this.head = 0
    return rest
  }
}
