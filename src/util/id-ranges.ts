/**
 * A user namespace's map, a range a line: the `count` ids from `inside` are the host's from
 * `host`. A sandbox with root inside maps two ids, root and the user; one on an image maps a
 * block of 65,536, so that every owner an image names (apt's _apt, postgres, nobody) is someone.
 */
export interface IdRange {
  inside: number;
  host: number;
  count: number;
}

/** As /proc/PID/uid_map and gid_map take it. */
export function procIdMap(ranges: readonly IdRange[]): string {
  return ranges.map(({ inside, host, count }) => `${inside} ${host} ${count}\n`).join('');
}

/** The host id an id inside maps to, if it is mapped. */
export function hostId(ranges: readonly IdRange[], inside: number): number | undefined {
  const range = ranges.find((candidate) => inside >= candidate.inside && inside - candidate.inside < candidate.count);
  return range && range.host + (inside - range.inside);
}
