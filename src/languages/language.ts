import type { MemoryMechanism } from '../isolation/types.js';
import type { PrivateToolchains } from './private-toolchains.js';
import type { SearchContext } from './resolve.js';
import type { ToolchainResult, Toolchain } from './toolchain.js';

export interface ResolveContext extends SearchContext {
  /** Makes an install under a private home reachable by the sandboxes. */
  privateToolchains: PrivateToolchains;
}

/** Paths as the sandbox sees them. */
export interface JobPaths {
  /** The job's working directory, e.g. /tmp/job-1a2b3c4d. */
  dir: string;
  source: string;
  /** Where a compiled program appears in the run sandbox. */
  program: string;
  /** Where the compiler writes its output in the compile sandbox. */
  compileOutput: string;
}

export interface Invocation {
  argv: string[];
  env: Record<string, string>;
}

/** What a compiler is given besides the paths. */
export interface CompileInput {
  code: string;
  /** The names of the request's other files, beside the source in the job dir. */
  files: readonly string[];
  memoryBytes: number;
}

/** How one language is written to disk, compiled and run. */
export interface LanguageDefinition {
  name: string;
  /** The source's file name in the job dir: java's must be named after its public class. */
  sourceFile(code: string): string;
  memoryMechanism: MemoryMechanism;
  resolveToolchain(context: ResolveContext): Promise<ToolchainResult>;
  /** Present for compiled languages: runs in the job dir, writes `paths.compileOutput`. Sources are named relative, so diagnostics read `script.rs:2:18`. */
  compile?(toolchain: Toolchain, paths: JobPaths, input: CompileInput): Invocation;
  run(toolchain: Toolchain, paths: JobPaths, limits: { memoryBytes: number }): Invocation;
  /**
   * An interpreter that starts before its program is known and then reads it from stdin
   * (a JSON header line `{"source", "bytes", "args"}`, the program's bytes, then the program's
   * own stdin): a sandbox can hold it warm, past the interpreter's start-up, for one job.
   */
  waiting?(toolchain: Toolchain, limits: { memoryBytes: number }): Invocation;
}
