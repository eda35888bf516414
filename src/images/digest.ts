import { createHash, type BinaryLike } from 'node:crypto';

/** The OCI digest of `data` (a blob, a manifest, a config): `sha256:` and its SHA-256 in hex. */
export function sha256Digest(data: BinaryLike): string {
  return `sha256:${createHash('sha256').update(data).digest('hex')}`;
}
