/**
 * Where each view lives in the app: one path per view, its main id in the path, every other parameter in the query
 * string. The server reads a request's path back into the view's arguments (`viewOfPath`); the browser builds links
 * from the same table (`VIEW_PATHS`, handed to the web runtime), so every page is a deep link and the browser's
 * back and forward buttons simply work.
 */
export const VIEW_PATHS: Record<string, string> = {
  agents: "/",
  agent: "/agents/:agent_id",
  session: "/sessions/:session_id",
  decision: "/decisions/:ledger_id",
  decisions: "/decisions",
  pulse: "/pulse",
  feature: "/features/:feature_id",
  graph: "/graph"
}

const routes = Object.entries(VIEW_PATHS).map(([view, pattern]) => {
  const names: Array<string> = []
  const regex = new RegExp(`^${pattern.replace(/:(\w+)/g, (_, name: string) => {
    names.push(name)
    return "([^/]+)"
  })}$`)
  return { view, names, regex }
})

/**
 * The view and its arguments for a path and query, as text (a repeated parameter as a list; `argumentsOf` gives
 * them the types the view takes); undefined when no view lives there.
 */
export const viewOfPath = (pathname: string, query: URLSearchParams): { readonly view: string; readonly args: Record<string, string | Array<string>> } | undefined => {
  for (const route of routes) {
    const match = route.regex.exec(pathname)
    if (match === null) continue
    const args: Record<string, string | Array<string>> = {}
    for (const key of new Set(query.keys())) {
      const values = query.getAll(key)
      args[key] = values.length > 1 ? values : values[0]!
    }
    route.names.forEach((name, i) => {
      args[name] = decodeURIComponent(match[i + 1]!)
    })
    return { view: route.view, args }
  }
  return undefined
}

/** The path of a view's arguments (the same rule the browser applies). */
export const pathOfView = (args: Record<string, unknown>): string => {
  const { view, ...rest } = args
  let path = VIEW_PATHS[String(view)] ?? "/"
  const query = new URLSearchParams()
  for (const [key, value] of Object.entries(rest)) {
    if (value === undefined || value === null) continue
    if (path.includes(`:${key}`)) path = path.replace(`:${key}`, encodeURIComponent(String(value)))
    else if (Array.isArray(value)) value.forEach((item) => query.append(key, String(item)))
    else query.set(key, String(value))
  }
  const search = query.toString()
  return search === "" ? path : `${path}?${search}`
}
