/** Small helpers the materialiser's writers share. */

/** Sums numeric fields per key (one row per key for `INSERT … ON CONFLICT DO UPDATE`). */
export const groupBy = <A, K>(items: ReadonlyArray<A>, key: (item: A) => string, init: (item: A) => K, add: (acc: K, item: A) => void) => {
  const groups = new Map<string, K>()
  for (const item of items) {
    const k = key(item)
    const existing = groups.get(k)
    if (existing === undefined) groups.set(k, init(item))
    else add(existing, item)
  }
  return groups
}

/** Widens a group's time span to include `at`. */
export const widen = (acc: { first: Date; last: Date }, at: Date) => {
  if (at < acc.first) acc.first = at
  if (at > acc.last) acc.last = at
}
