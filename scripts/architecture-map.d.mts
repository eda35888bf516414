/** scripts/architecture-map.mjs: the map's problems, one line each; none when it matches `root`'s src/. */
export function mapProblems(mapText: string, root?: string): string[];
export const ROOT: string;
