import { basename } from 'node:path';
import type { LanguageDefinition } from './language.js';
import { placeToolchain } from './place.js';
import { findNativeExecutable, versionOf } from './resolve.js';

interface GccLanguage {
  name: string;
  /** The GCC driver: gcc or g++. */
  driver: string;
  sourceFile: string;
  /** The request's other files that are compiled with the source (headers are only included). */
  sources: RegExp;
  /** Linked after the sources. */
  libraries: readonly string[];
}

/** C and C++: one GCC driver each, the same build and run. */
function gccLanguage(spec: GccLanguage): LanguageDefinition {
  return {
    name: spec.name,
    sourceFile: () => spec.sourceFile,
    // Native programs often declare large static arrays they touch only in part: RLIMIT_AS
    // would count them whole (the program could not even start); the cgroup counts touched pages.
    memoryMechanism: 'cgroup',
    async resolveToolchain(context) {
      const executable = findNativeExecutable(context, [`/usr/bin/${spec.driver}`], [spec.driver]);
      if (!executable) return { missing: true, message: `${spec.name} toolchain not found: install it with scripts/setup-host.sh (apt-get install ${spec.driver})` };
      return placeToolchain(executable, await versionOf(executable, ['--version']), spec.name, context.privateToolchains);
    },
    compile(toolchain, paths, { files }) {
      const sources = [basename(paths.source), ...files.filter((name) => spec.sources.test(name))];
      return { argv: [toolchain.executable, '-O2', '-pipe', '-fdiagnostics-color=never', '-o', paths.compileOutput, ...sources, ...spec.libraries], env: {} };
    },
    run(_toolchain, paths) {
      return { argv: [paths.program], env: {} };
    },
  };
}

export const c = gccLanguage({ name: 'c', driver: 'gcc', sourceFile: 'main.c', sources: /\.c$/, libraries: ['-lm'] });
export const cpp = gccLanguage({ name: 'cpp', driver: 'g++', sourceFile: 'main.cpp', sources: /\.(cc|cpp|cxx)$/, libraries: [] });
