/**
 * Prometheus text expositions of several threads as one: each family once, with its HELP and TYPE, and the
 * samples of every thread under it (series are told apart by their labels, e.g. `thread`; a series repeated keeps
 * its first value).
 */
export const mergeExpositions = (texts: ReadonlyArray<string>): string => {
  const families = new Map<string, { header: Array<string>; samples: Map<string, string> }>()
  for (const text of texts) {
    let family: { header: Array<string>; samples: Map<string, string> } | undefined
    for (const line of text.split("\n")) {
      if (line === "") continue
      const comment = /^# (HELP|TYPE) (\S+)/.exec(line)
      if (comment !== null) {
        const name = comment[2]!
        family = families.get(name)
        if (family === undefined) {
          family = { header: [], samples: new Map() }
          families.set(name, family)
        }
        if (family.header.length < 2 && !family.header.some((kept) => kept.startsWith(`# ${comment[1]} `))) family.header.push(line)
        continue
      }
      if (family === undefined) continue
      const series = line.slice(0, line.lastIndexOf(" "))
      if (!family.samples.has(series)) family.samples.set(series, line)
    }
  }
  let merged = ""
  for (const { header, samples } of families.values()) merged += [...header, ...samples.values()].join("\n") + "\n"
  return merged
}

/** Adds a label to every sample of an exposition (series of several threads kept apart, e.g. `gateway_worker`). */
export const withLabel = (text: string, name: string, value: string): string => {
  const label = `${name}="${value.replace(/["\\\n]/g, "\\$&")}"`
  return text.replace(/^([a-zA-Z_:][\w:]*)(\{)?/gm, (_match, metric: string, brace: string | undefined) =>
    brace === undefined ? `${metric}{${label}}` : `${metric}{${label},`)
}
