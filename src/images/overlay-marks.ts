import { execFileWhenQuiet } from '../util/fork-gate.js';
import { IMAGE_ROOT_HELPER } from './image-root.js';
import type { UnpackedLayer } from './layer-unpack.js';

/**
 * Puts a layer's whiteouts and opaque directories into its tree as overlayfs reads them: a 0/0
 * character device in place of each deleted name, and `trusted.overlay.opaque=y` on each opaque
 * directory. Node makes neither (no mknod, no xattrs), so the native helper does, as root, each
 * path resolved under the tree without following a link.
 */
export async function applyOverlayMarks(tree: string, layer: Pick<UnpackedLayer, 'whiteouts' | 'opaque'>): Promise<void> {
  if (layer.whiteouts.length === 0 && layer.opaque.length === 0) return;
  const list = [...layer.whiteouts.map((path) => `w${path}`), ...layer.opaque.map((path) => `o${path}`)].join('\0');
  await execFileWhenQuiet(IMAGE_ROOT_HELPER, ['marks', tree], { input: `${list}\0` });
}
