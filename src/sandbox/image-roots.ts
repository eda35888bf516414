import { SandboxUnavailableError } from './types.js';

/**
 * A backend that does not run sandboxes on an image's root yet says so, rather than run one on
 * the host's system under the image's name.
 */
export function imageRootUnsupported(kind: string): SandboxUnavailableError {
  return new SandboxUnavailableError(`the ${kind} backend does not run templates made of images yet: create the sandbox on local_process`);
}
