/** Rounds to a fixed number of decimal places (money to 1e-8, scores to 1e-3). */
export const roundTo = (value: number, decimals: number): number => {
  const factor = 10 ** decimals
  return Math.round(value * factor) / factor
}

export const clamp01 = (value: number): number => Math.min(1, Math.max(0, value))
