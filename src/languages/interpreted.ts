import type { Mount } from '../isolation/types.js';
import type { LanguageDefinition } from './language.js';
import { placeToolchain } from './place.js';
import { findNativeExecutable, versionOf } from './resolve.js';

/** A language whose programs run as `interpreter SOURCE ARGS...`, with nothing to compile. */
export interface InterpreterSpec {
  name: string;
  sourceFile: string;
  /** Tried first, in order (so /usr/bin beats a version-manager shim earlier on PATH), then `names` on PATH. */
  wellKnown: readonly string[];
  names: readonly string[];
  versionArgs: readonly string[];
  /** What the 127 answer says after "<name> toolchain not found: ". */
  missing: string;
  /** Read-only mounts beyond the install itself: configuration the interpreter reads from /etc. */
  configMounts?(hostExecutable: string): Promise<Mount[]>;
}

export function interpreted(spec: InterpreterSpec): LanguageDefinition {
  return {
    name: spec.name,
    sourceFile: () => spec.sourceFile,
    // These interpreters reserve no large address ranges, so RLIMIT_AS bounds them and an
    // oversized allocation fails inside the program (its own out-of-memory error), not a kill.
    memoryMechanism: 'address-space',
    async resolveToolchain(context) {
      const executable = findNativeExecutable(context, spec.wellKnown, spec.names);
      if (!executable) return { missing: true, message: `${spec.name} toolchain not found: ${spec.missing}` };
      const toolchain = await placeToolchain(executable, await versionOf(executable, spec.versionArgs), spec.name, context.privateToolchains);
      return spec.configMounts ? { ...toolchain, mounts: [...toolchain.mounts, ...(await spec.configMounts(executable))] } : toolchain;
    },
    run(toolchain, paths) {
      return { argv: [toolchain.executable, paths.source], env: {} };
    },
  };
}
