import type { PrivateToolchains } from './private-toolchains.js';
import { installRoot, relocatedMount } from './resolve.js';
import type { Toolchain } from './toolchain.js';

/**
 * Makes a host executable usable inside the sandbox: /usr is mounted as is; any other
 * install (rustup, nvm, a pyenv build) is mounted read-only under /opt/toolchains/<name>.
 */
export async function placeToolchain(hostExecutable: string, version: string, name: string, privateToolchains: PrivateToolchains): Promise<Toolchain> {
  if (hostExecutable.startsWith('/usr/')) return { hostExecutable, executable: hostExecutable, version, mounts: [] };
  const root = installRoot(hostExecutable);
  const reachable = await privateToolchains.reachable(root, name);
  const mount = relocatedMount(reachable, name);
  return { hostExecutable, executable: mount.sandbox + hostExecutable.slice(root.length), version, mounts: [mount] };
}
