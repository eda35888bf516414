import type { LanguageDefinition } from './language.js';
import { placeToolchain } from './place.js';
import { findNativeExecutable, versionOf } from './resolve.js';

export const bash: LanguageDefinition = {
  name: 'bash',
  sourceFile: () => 'script.sh',
  memoryMechanism: 'address-space',
  async resolveToolchain(context) {
    const executable = findNativeExecutable(context, ['/usr/bin/bash', '/bin/bash'], ['bash']);
    if (!executable) return { missing: true, message: 'bash toolchain not found: bash is not installed (apt-get install bash)' };
    return placeToolchain(executable, await versionOf(executable, ['--version']), 'bash', context.stateDir);
  },
  run(toolchain, paths) {
    return { argv: [toolchain.executable, paths.source], env: {} };
  },
};
