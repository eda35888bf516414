import { execFile } from 'node:child_process';
import { homedir } from 'node:os';
import { basename, join } from 'node:path';
import { promisify } from 'node:util';
import type { LanguageDefinition } from './language.js';
import { placeToolchain } from './place.js';
import { isExecutableFile } from '../isolation/command-path.js';
import { candidatePaths, versionOf } from './resolve.js';

const run = promisify(execFile);

export const rust: LanguageDefinition = {
  name: 'rust',
  sourceFile: () => 'script.rs',
  memoryMechanism: 'cgroup',
  async resolveToolchain(context) {
    const cargoBin = join(process.env.CARGO_HOME ?? join(homedir(), '.cargo'), 'bin');
    // Not realpath'd: a rustup proxy is a link to rustup and dispatches on its own name.
    const launcher = candidatePaths(context, ['/usr/bin/rustc', join(cargoBin, 'rustc')], ['rustc']).find(isExecutableFile);
    if (!launcher) return { missing: true, message: 'rust toolchain not found: rustc is not installed (apt-get install rustc, or rustup)' };
    // rustup installs a proxy; the real compiler lives in the active toolchain's sysroot.
    const { stdout } = await run(launcher, ['--print', 'sysroot'], { env: { ...process.env, PATH: `${cargoBin}:/usr/bin:/bin` } });
    const executable = join(stdout.trim(), 'bin', 'rustc');
    return placeToolchain(executable, await versionOf(executable, ['--version']), 'rust', context.privateToolchains);
  },
  compile(toolchain, paths) {
    return {
      argv: [toolchain.executable, '--edition', '2021', '-C', 'opt-level=2', '-C', 'debuginfo=0', '--color', 'never', '-o', paths.compileOutput, basename(paths.source)],
      env: {},
    };
  },
  run(_toolchain, paths) {
    return { argv: [paths.program], env: {} };
  },
};
