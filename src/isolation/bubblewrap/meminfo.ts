/**
 * A /proc/meminfo that reports a job's memory limit as the machine's memory, so `free` and
 * runtimes that size themselves from it (V8, the JVM, Go's GC) see the limit, not the host.
 */
export function meminfoText(memoryBytes: number): string {
  const kib = Math.floor(memoryBytes / 1024);
  const lines: Array<[string, number]> = [
    ['MemTotal', kib],
    ['MemFree', kib],
    ['MemAvailable', kib],
    ['Buffers', 0],
    ['Cached', 0],
    ['SwapCached', 0],
    ['SwapTotal', 0],
    ['SwapFree', 0],
    ['Shmem', 0],
  ];
  return lines.map(([key, value]) => `${`${key}:`.padEnd(16)}${String(value).padStart(8)} kB\n`).join('');
}
