/** Quantile of sorted values, interpolated between ranks (the median of 8 rounds is the mean of the middle two). */
export function interpolatedQuantile(sorted: readonly number[], q: number): number {
  const i = (sorted.length - 1) * q;
  const lo = Math.floor(i);
  const hi = Math.ceil(i);
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (i - lo);
}

/** The median of the values given (interpolated for an even count); undefined for none. */
export function median(values: readonly (number | undefined)[]): number | undefined {
  const xs = values.filter((v): v is number => v !== undefined && Number.isFinite(v)).sort((a, b) => a - b);
  return xs.length ? interpolatedQuantile(xs, 0.5) : undefined;
}
