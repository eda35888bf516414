import type { LanguageDefinition } from './language.js';
import { placeToolchain } from './place.js';
import { realpathSync } from 'node:fs';
import { findNativeExecutable, versionOf } from './resolve.js';
import { guestProgram } from '../util/guest-program.js';

const waitingNode = guestProgram(new URL('./waiting-node.cjs', import.meta.url));

export const node: LanguageDefinition = {
  name: 'node',
  sourceFile: () => 'script.js',
  // V8 reserves far more address space than it uses: only the cgroup can bound it.
  memoryMechanism: 'cgroup',
  async resolveToolchain(context) {
    const executable = findNativeExecutable(context, [process.execPath, '/usr/bin/node'], ['node']);
    if (!executable) return { missing: true, message: 'node toolchain not found: install Node.js 20 or later' };
    const version = executable === realpathSync(process.execPath) ? process.version : await versionOf(executable, ['--version']);
    return placeToolchain(executable, version, 'node', context.privateToolchains);
  },
  run(toolchain, paths, { memoryBytes }) {
    return { argv: [...nodeFlags(toolchain.executable, memoryBytes), paths.source], env: {} };
  },
  waiting(toolchain, { memoryBytes }) {
    return { argv: [...nodeFlags(toolchain.executable, memoryBytes), '-e', waitingNode()], env: {} };
  },
};

/** The interpreter and its flags, whichever way the program reaches it (typescript's too). */
export function nodeFlags(executable: string, memoryBytes: number): string[] {
  // A heap cap under the cgroup limit turns runaway allocation into a JS heap error, not a kill.
  const heapMiB = Math.max(16, Math.floor((memoryBytes / 1024 / 1024) * 0.75));
  return [executable, `--max-old-space-size=${heapMiB}`, '--experimental-detect-module', '--disable-warning=ExperimentalWarning'];
}
