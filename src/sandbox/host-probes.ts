import { access, constants, readdir } from 'node:fs/promises';
import type { HostProbe } from './probed-backend.js';

async function executable(path: string): Promise<boolean> {
  return access(path, constants.X_OK).then(
    () => true,
    () => false,
  );
}

/** The microVM: QEMU's `-M microvm` machine and a kernel to boot. */
export const microvmProbe: HostProbe = {
  async missing() {
    const missing: string[] = [];
    if (!(await executable('/usr/bin/qemu-system-x86_64'))) missing.push('qemu-system-x86_64 is not installed: apt-get install qemu-system-x86');
    const kernels = await readdir('/boot').then(
      (names) => names.filter((name) => name.startsWith('vmlinuz-')),
      () => [],
    );
    if (kernels.length === 0) missing.push('no guest kernel in /boot: apt-get install linux-image-amd64');
    return missing;
  },
};
