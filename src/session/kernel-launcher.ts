import type { Invocation } from '../languages/language.js';
import type { Toolchain } from '../languages/toolchain.js';
import { guestProgram } from '../util/guest-program.js';

/** The launcher (kernel-launcher.py) that moves a kernel's protocol off stdio before exec'ing it. */
const launcher = guestProgram(new URL('./kernel-launcher.py', import.meta.url));

export function launchKernel(python: Toolchain, kernel: Invocation): Invocation {
  return { argv: [python.executable, '-c', launcher(), ...kernel.argv], env: { ...kernel.env } };
}
