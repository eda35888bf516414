// Stack frames that point into a runtime, a test framework or a toolchain's standard library.
// They repeat in every failure and never say what in the agent's own code went wrong, so the
// tests and errors modes drop them while keeping frames in the project's files.

const INTERNAL_FRAME_PATTERNS: readonly RegExp[] = [
  // Node: "at fn (node:internal/…)" and the same frames without "at" in TAP's YAML stack
  /^\s*(?:at )?(?:async )?[^()]*\((?:node:internal\/|node:async_hooks|node:events|node:child_process)/,
  /^\s*at (?:async )?(?:node:internal\/|node:async_hooks)/,
  /^\s*(?:at )?async Promise\.all \(index \d+\)$/,
  /^\s*at (?:new Promise \(<anonymous>\)|process\.processTicksAndRejections|processTicksAndRejections)/,
  /^\s*at .*[\\/]node_modules[\\/]/,
  // Rust backtraces: std/core frames and their "at /rustc/<hash>/library/…" locations
  /^\s+at \/rustc\/[0-9a-f]+\/library\//,
  /^\s+\d+: (?:std|core|alloc|test|__rustc)::/,
  /^\s+\d+: <(?:fn\(\)|core::|std::|alloc::)/,
  // Go: runtime/testing frames, their GOROOT locations and panic re-raises
  /^\t\S*\/src\/(?:testing|runtime|reflect|sync|internal)\/\S+\.go:\d+/,
  /^(?:testing|runtime|reflect|sync)\.\S+\(.*\)$/,
  /^created by (?:testing|runtime)\./,
  /^panic\(\{0x[0-9a-f]+, 0x[0-9a-f]+\}\)$/,
];

export function isInternalFrame(line: string): boolean {
  return INTERNAL_FRAME_PATTERNS.some((re) => re.test(line));
}
