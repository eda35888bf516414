/** Adds `delta` to a count kept by name; a count of 0 is forgotten, so a map holds only what is open. */
export function addCount(counts: Map<string, number>, name: string, delta: number): void {
  const total = (counts.get(name) ?? 0) + delta;
  if (total > 0) counts.set(name, total);
  else counts.delete(name);
}
