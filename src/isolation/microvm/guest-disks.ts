/**
 * The serial of a VM's image disk (its job's image root, image-root-disk.ts), by which the guest
 * runner finds it. A module of its own: the guest imports it, and the guest has no dependency
 * of this package but the ones its runner needs (guest-image.ts packageFiles).
 */
export const GUEST_IMAGE_DISK = 'agent-runner-image';

/** The tag of the VM's share (virtio-9p: qemu-vm.ts shareVolume) and where the VM agent mounts it, when its job has volumes. */
export const GUEST_VOLUMES_TAG = 'agent-runner-volumes';
export const GUEST_VOLUMES_DIR = '/run/agent-runner-volumes';
