import { Type, type Static } from '@sinclair/typebox';
import { BACKEND_KIND_NAMES, BACKEND_KINDS } from './backend-kinds.js';

export const BackendKindSchema = Type.Union(
  BACKEND_KIND_NAMES.map((kind) => Type.Literal(kind)),
  {
    description: 'local_process (alias bubblewrap), gvisor, or microvm (alias firecracker).',
  },
);
export type BackendKindName = Static<typeof BackendKindSchema>;

/**
 * Any name is taken here: one no backend has is answered as a kind not usable on this host is
 * (`backend_unavailable` / `backend.unavailable`, naming the known kinds), on every face.
 */
export const RequestedBackendKindSchema = Type.String({
  minLength: 1,
  maxLength: 64,
  description: `${BACKEND_KIND_NAMES.join(', ')}: local_process (alias bubblewrap), gvisor, or microvm (alias firecracker). Any other name ends the job backend_unavailable / backend.unavailable, as a kind not usable here does.`,
  examples: [...BACKEND_KIND_NAMES],
});

export const BackendChoiceSchema = Type.Object(
  { kind: RequestedBackendKindSchema },
  { additionalProperties: false, description: 'Which sandbox backend runs the job (default: the service default).' },
);
export type BackendChoice = Static<typeof BackendChoiceSchema>;

/**
 * What a long-lived sandbox on it keeps when paused (and what its forks and snapshots copy):
 * memory (every process and its state, files too) or files (its home; its processes end).
 */
export const PauseKindSchema = Type.Union([Type.Literal('memory'), Type.Literal('files')], {
  $id: 'PauseKind',
  description: 'What a paused sandbox keeps: memory (processes with their state, and files) or files (its home directory; processes end).',
});
export type PauseKind = Static<typeof PauseKindSchema>;

export const BackendCapabilitiesSchema = Type.Object(
  {
    network: Type.Array(Type.Union([Type.Literal('none'), Type.Literal('egress'), Type.Literal('proxy'), Type.Literal('host')]), {
      description:
        'Network modes it can give a job: none (loopback only), egress (a namespace of its own behind user-mode networking, for run jobs\' network "allow"), proxy (HTTP and TLS by name through the job\'s egress proxy on the host, secrets put in place there, for network {"allow_domains": [...]}), host (the host\'s network, agent-exec only).',
    }),
    memory: Type.Array(Type.Union([Type.Literal('cgroup'), Type.Literal('address-space'), Type.Literal('vm')]), { description: 'How it bounds memory.' }),
    snapshot: Type.Boolean({ description: 'Whether it can snapshot and restore a started sandbox.' }),
    pause: PauseKindSchema,
    root_inside: Type.Boolean({
      description:
        "Whether a long-lived sandbox on it has a root beside its user (E2B's `user: 'root'`): uid 0 of the sandbox's own user namespace or VM, mapped to an unprivileged host uid, never the host's root. Where false, root's requests run as the user.",
    }),
    host_work_dir: Type.Boolean({ description: 'Whether the job work dir is a host directory (false: it lives inside the sandbox).' }),
    volumes: Type.Union([Type.Literal('attach'), Type.Literal('bind'), Type.Literal('share'), Type.Literal('none')], {
      description:
        'How a long-lived sandbox on it mounts volumes (docs/volumes.md): attach (into the running sandbox, so a pre-started one takes them), bind (bound in as it starts: it is not pre-started), share (shared with the guest of a microVM through a 9p device, found as its job starts), none (refused, backend.unavailable).',
    }),
    profiles: Type.Array(Type.String(), { description: 'Sandbox profiles it can build (snippet, run-job, task, workspace).' }),
  },
  { additionalProperties: false },
);
export type BackendCapabilities = Static<typeof BackendCapabilitiesSchema>;

export const BackendDescriptionSchema = Type.Object(
  {
    kind: Type.Union(BACKEND_KINDS.map((kind) => Type.Literal(kind))),
    aliases: Type.Array(Type.String()),
    available: Type.Boolean({ description: 'Whether a job can run on it now (false while it is still preparing).' }),
    state: Type.Union([Type.Literal('ready'), Type.Literal('preparing'), Type.Literal('unavailable')], {
      description:
        'ready: jobs run on it; preparing: the service is still preparing it (probes, a guest image build) and a job for it waits until it is ready, within its own timeout; unavailable: it cannot run here (notes say why).',
    }),
    notes: Type.Array(Type.String(), { description: 'Why it is unavailable, or how it enforces limits here.' }),
    capabilities: BackendCapabilitiesSchema,
  },
  { additionalProperties: false },
);
export const BackendListSchema = Type.Array(BackendDescriptionSchema, { $id: 'BackendList', title: 'Sandbox backends' });
export type BackendDescription = Static<typeof BackendDescriptionSchema>;

export const BackendPreparationSchema = Type.Object(
  {
    kind: Type.Union(BACKEND_KINDS.map((kind) => Type.Literal(kind))),
    state: Type.Union([Type.Literal('ready'), Type.Literal('unavailable')], {
      description: 'ready: everything it builds on first use is built (or was already); unavailable: it cannot run here (notes say why).',
    }),
    notes: Type.Array(Type.String(), { description: 'Why it is unavailable, or how it enforces limits here.' }),
    seconds: Type.Number({ minimum: 0, description: 'How long its preparation took (a second run only checks).' }),
  },
  { additionalProperties: false },
);
export const PreparationReportSchema = Type.Array(BackendPreparationSchema, {
  $id: 'PreparationReport',
  title: 'What `agent-runner prepare` built: each backend kind asked for, ready or unavailable and why',
});
export type BackendPreparation = Static<typeof BackendPreparationSchema>;
