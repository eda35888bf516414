import { Type, type Static } from '@sinclair/typebox';

/**
 * Volumes: named file systems held by the service, each of a fixed size, that outlive the
 * sandboxes mounting them. `/v1/volumes` and E2B's `/volumes` are two views of these; this is
 * ours, defined once for the HTTP routes, the typed client and the CLI.
 */

/** A volume's id: lower-case letters and digits, as a sandbox's. */
export const VOLUME_ID_PATTERN = '^vol[0-9a-z]{21}$';
/** A name its owner gives it, unique among that owner's volumes. */
const VolumeName = Type.String({
  minLength: 1,
  maxLength: 63,
  pattern: '^[A-Za-z0-9][A-Za-z0-9._-]*$',
  description: 'Unique among its API key’s volumes: letters, digits, `.`, `_` and `-`.',
});

export const VolumeCreateRequestSchema = Type.Object(
  {
    name: VolumeName,
    size_mb: Type.Optional(
      Type.Integer({ minimum: 16, description: 'Its size: a write past it fails with ENOSPC inside the sandbox (default volumes.defaultBytes, at most volumes.maxBytes).' }),
    ),
  },
  { $id: 'VolumeCreateRequest', additionalProperties: false, title: 'Create a volume' },
);
export type VolumeCreateRequest = Static<typeof VolumeCreateRequestSchema>;

export const VolumeSchema = Type.Object(
  {
    id: Type.String({ pattern: VOLUME_ID_PATTERN }),
    name: VolumeName,
    size_mb: Type.Integer(),
    used_mb: Type.Optional(Type.Integer({ description: 'What its files take now (present while it is mounted on this machine).' })),
    created_at: Type.String({ format: 'date-time' }),
    mounted_by: Type.Array(Type.String(), { description: 'The running sandboxes that mount it.' }),
    api_key: Type.Optional(Type.String({ description: 'The name of the API key that owns it (service.apiKeys); absent: the service token.' })),
  },
  { $id: 'Volume', additionalProperties: false, title: 'A volume' },
);
export type Volume = Static<typeof VolumeSchema>;

/** A volume mounted into a sandbox at its create (and again at each resume or fork of it). */
export const VolumeMountSchema = Type.Object(
  {
    volume: Type.String({ minLength: 1, maxLength: 63, description: 'The volume’s name or id.' }),
    path: Type.String({
      minLength: 2,
      maxLength: 1024,
      pattern: '^/[^\\0]*$',
      description: 'Where the sandbox sees it: an absolute path; its missing directories are made.',
    }),
    read_only: Type.Optional(Type.Boolean({ description: 'Mounted read-only (default false).' })),
  },
  { $id: 'VolumeMount', additionalProperties: false },
);
export type VolumeMount = Static<typeof VolumeMountSchema>;

export const VolumeDeleteQuerySchema = Type.Object(
  { force: Type.Optional(Type.Boolean({ description: 'Delete it even while running sandboxes mount it: they keep what they see until they end.' })) },
  { additionalProperties: false },
);
