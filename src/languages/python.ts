import type { LanguageDefinition } from './language.js';
import { placeToolchain } from './place.js';
import { findNativeExecutable, versionOf } from './resolve.js';
import { guestProgram } from '../util/guest-program.js';

const waitingPython = guestProgram(new URL('./waiting-python.py', import.meta.url));

export const python: LanguageDefinition = {
  name: 'python',
  sourceFile: () => 'script.py',
  // RLIMIT_AS makes oversized allocations raise MemoryError instead of an OOM kill.
  memoryMechanism: 'address-space',
  async resolveToolchain(context) {
    // /usr/bin first: the python3 on PATH is often a pyenv shim costing ~100 ms a start.
    const executable = findNativeExecutable(context, ['/usr/bin/python3', '/usr/local/bin/python3'], ['python3']);
    if (!executable) return { missing: true, message: 'python toolchain not found: python3 is not installed (apt-get install python3)' };
    return placeToolchain(executable, await versionOf(executable, ['--version']), 'python', context.privateToolchains);
  },
  run(toolchain, paths) {
    return { argv: [toolchain.executable, paths.source], env: { PYTHONDONTWRITEBYTECODE: '1' } };
  },
  waiting(toolchain) {
    return { argv: [toolchain.executable, '-c', waitingPython()], env: { PYTHONDONTWRITEBYTECODE: '1' } };
  },
};
