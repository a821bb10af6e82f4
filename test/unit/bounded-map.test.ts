/** BoundedMap: never more than its capacity; a set makes its key the newest; the oldest goes first. */
import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import { BoundedMap } from "../../src/collections/BoundedMap.ts"

describe("BoundedMap", () => {
  it("drops the key set longest ago, and a set again counts as new", () => {
    const map = new BoundedMap<string, number>(2)
    map.set("a", 1).set("b", 2).set("a", 3).set("c", 4)
    assert.isFalse(map.has("b"), "b was set longest ago")
    assert.strictEqual(map.get("a"), 3)
    assert.strictEqual(map.get("c"), 4)
    assert.strictEqual(map.size, 2)
  })

  it("holds at most its capacity and always its newest key, whatever is set", () => {
    fc.assert(fc.property(fc.integer({ min: 1, max: 8 }), fc.array(fc.integer({ min: 0, max: 20 }), { maxLength: 200 }), (capacity, keys) => {
      const map = new BoundedMap<number, number>(capacity)
      for (const [i, key] of keys.entries()) {
        map.set(key, i)
        if (map.size > capacity || map.get(key) !== i) return false
      }
      return true
    }))
  })
})
