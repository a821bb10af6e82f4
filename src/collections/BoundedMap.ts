/**
 * A Map that holds at most `capacity` keys: setting a key makes it the newest, and a set past the capacity drops the
 * oldest. For the in-memory caches and counters kept per token, address or client, which must not grow with what
 * callers send. Reads do not reorder (they stay a plain Map lookup on hot paths).
 */
export class BoundedMap<K, V> {
  private readonly entries = new Map<K, V>()
  readonly capacity: number

  constructor(capacity: number) {
    this.capacity = capacity
  }

  get size(): number {
    return this.entries.size
  }

  get(key: K): V | undefined {
    return this.entries.get(key)
  }

  has(key: K): boolean {
    return this.entries.has(key)
  }

  set(key: K, value: V): this {
    this.entries.delete(key)
    if (this.entries.size >= this.capacity) this.entries.delete(this.entries.keys().next().value!)
    this.entries.set(key, value)
    return this
  }

  delete(key: K): boolean {
    return this.entries.delete(key)
  }
}
