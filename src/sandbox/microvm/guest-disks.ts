/**
 * The serial of a VM's image disk (its job's image root, image-root-disk.ts), by which the guest
 * runner finds it. A module of its own: the guest imports it, and the guest has no dependency
 * of this package but the ones its runner needs (guest-image.ts packageFiles).
 */
export const GUEST_IMAGE_DISK = 'agent-runner-image';
