import { createRequire } from 'node:module';
import { basename, dirname, join } from 'node:path';
import type { LanguageDefinition } from './language.js';
import { node, nodeFlags } from './node.js';
import { placeToolchain } from './place.js';
import { findNativeExecutable, versionOf } from './resolve.js';
import { isMissing } from './toolchain.js';

/**
 * TypeScript is transpiled by esbuild (types are stripped, not checked: a syntax error fails
 * the compile, a type error does not) and the JavaScript it writes runs on node, as a node
 * snippet does: ES module or CommonJS by the same detection.
 */
export const typescript: LanguageDefinition = {
  name: 'typescript',
  sourceFile: () => 'script.ts',
  memoryMechanism: node.memoryMechanism,
  async resolveToolchain(context) {
    const executable = findNativeExecutable(context, installedEsbuild(), ['esbuild']);
    if (!executable) return { missing: true, message: 'typescript toolchain not found: esbuild is not installed (npm install esbuild)' };
    const runtime = await node.resolveToolchain(context);
    if (isMissing(runtime)) return { missing: true, message: `typescript runs on node: ${runtime.message}` };
    const version = `esbuild ${await versionOf(executable, ['--version'])}`;
    return { ...(await placeToolchain(executable, version, 'typescript', context.privateToolchains)), runtime };
  },
  compile(toolchain, paths) {
    return {
      argv: [
        toolchain.executable,
        basename(paths.source),
        `--outfile=${paths.compileOutput}`,
        // Stack traces name the program's own lines: the map's path to the source is relative
        // to where the compiler writes, so it is rooted there to find the source beside the
        // program when it runs.
        '--sourcemap=inline',
        '--sources-content=false',
        `--source-root=${dirname(paths.compileOutput)}/`,
        '--log-level=warning',
        '--color=false',
      ],
      env: {},
    };
  },
  run(toolchain, paths, { memoryBytes }) {
    return { argv: [...nodeFlags(toolchain.runtime!.executable, memoryBytes), '--enable-source-maps', paths.program], env: {} };
  },
};

/** The esbuild this package's own node_modules holds, if any (its native binary, not a script). */
export function installedEsbuild(): string[] {
  try {
    return [join(dirname(createRequire(import.meta.url).resolve('esbuild/package.json')), 'bin', 'esbuild')];
  } catch {
    return [];
  }
}
