import type { Mount } from '../isolation/types.js';

/** A resolved toolchain: real executables (never shell shims), their version, and what to mount. */
export interface Toolchain {
  /** Host path of the real executable. */
  hostExecutable: string;
  /** Path of the executable as the sandbox sees it. */
  executable: string;
  version: string;
  /** Extra read-only mounts the toolchain needs (installs outside /usr, configuration under /etc). */
  mounts: Mount[];
  /**
   * What a compiled language's programs run on, when not on the machine itself: java's JVM,
   * typescript's node. Its mounts are the run's; the compiler's are not.
   */
  runtime?: Toolchain;
}

export interface MissingToolchain {
  missing: true;
  /** What is missing and how to install it, for the response's `error`. */
  message: string;
}

export type ToolchainResult = Toolchain | MissingToolchain;

export function isMissing(result: ToolchainResult): result is MissingToolchain {
  return 'missing' in result;
}
