import { randomBytes, randomInt } from 'node:crypto';
import { posix } from 'node:path';
import { environmentProblem } from '../contract/command-limits.js';
import { CodedError, contractError, invalidField } from '../contract/errors.js';
import type { SandboxCreateRequest } from '../contract/sandbox.js';
import type { Template } from '../contract/templates.js';
import type { VolumeMount } from '../contract/volumes.js';
import { ANY_NAME } from '../egress/domain-rule.js';
import { imageEnvironment } from '../images/image-manifest.js';
import type { SandboxBackend, SandboxNetwork } from '../isolation/types.js';
import { python } from '../languages/python.js';
import { isMissing } from '../languages/toolchain.js';
import type { RunnerRuntime } from '../runner/runtime.js';
import type { ImageTemplate } from '../templates/image-template.js';
import { openTemplateRegistry, type TemplateRegistry } from '../templates/template-registry.js';
import type { VolumeStore } from '../volumes/volume-store.js';
import { checkDesktop, DESKTOP_TEMPLATE } from './desktop-template.js';
import { SANDBOX_HOME, type PlannedVolume, type SandboxPlan } from './live-sandbox.js';
import { refusedHere } from './served-sandbox.js';
import { templateNames, templateSettings } from './templates.js';

/** A create as the sandbox host takes it: the request, and the API key it came with. */
export type LaunchRequest = SandboxCreateRequest & {
  api_key?: string;
  /** The image template of `template`, looked up once by create and taken by the capture and the plan; looked up by the plan when not given. */
  imageTemplate?: ImageTemplate | null;
};

/**
 * What a create becomes here (`plan`): its template (the configuration's, on the host's system,
 * or one made of an image), backend, python, network, volumes and limits, each checked against
 * what the configuration allows.
 */
export class SandboxPlanner {
  private imageTemplatesOpened: TemplateRegistry | null = null;

  constructor(
    private readonly runtime: RunnerRuntime,
    /** The volumes its sandboxes may mount; none where absent. */
    private readonly volumes: VolumeStore | null,
  ) {}

  /** The templates a create may name: the configuration's (the host's system) and those made of images. */
  async templates(): Promise<Template[]> {
    const host = templateNames(this.runtime.config.sandboxes).map((name): Template => ({ name, kind: 'host' }));
    return [...host, ...(await this.imageTemplates.listAll()).map((image): Template => ({ ...image, kind: 'image' }))];
  }

  /** The templates made of images, opened when a create first names a template not of the configuration. */
  get imageTemplates(): TemplateRegistry {
    return (this.imageTemplatesOpened ??= openTemplateRegistry(this.runtime.config));
  }

  /** The template made of an image named `name` (a lookup that may ask the cluster's registry); null for one of the configuration's or none. */
  async imageTemplateOf(name: string): Promise<ImageTemplate | null> {
    return templateSettings(this.runtime.config.sandboxes, name) === null ? await this.imageTemplates.lookup(name) : null;
  }

  async plan(request: LaunchRequest): Promise<SandboxPlan> {
    const { config } = this.runtime;
    const settings = config.sandboxes;
    const template = request.template ?? 'base';
    const fromImage = request.imageTemplate !== undefined ? request.imageTemplate : await this.imageTemplateOf(template);
    const named = templateSettings(settings, template) ?? (fromImage && {});
    if (named === null) {
      const known = [...templateNames(settings), ...this.imageTemplates.list().map((image) => image.name)].join(', ');
      throw new CodedError(contractError('template.not_found', `no template ${JSON.stringify(template)}: this server has ${known}`, { template }));
    }
    const timeoutSeconds = request.timeout_seconds ?? settings.defaultTimeoutSeconds;
    if (timeoutSeconds > settings.maxTimeoutSeconds) throw invalidField(`timeout must be at most ${settings.maxTimeoutSeconds} seconds, got ${timeoutSeconds}`, 'timeout');
    // The operator's word on the internet wins: E2B's SDK asks for it on every create by default.
    const allowed = named.allowInternetAccess ?? settings.allowInternetAccess;
    const internet = (request.allow_internet_access ?? allowed) && allowed && config.runJob.allowNetwork;
    let backend;
    try {
      backend = this.runtime.backends.get(request.backend?.kind ?? named.backend);
      if (template === DESKTOP_TEMPLATE && !fromImage) checkDesktop(backend);
    } catch (error) {
      throw refusedHere(error);
    }
    const network: SandboxNetwork = internet ? internetOn(backend) : 'none';
    const envVars = { ...named.envVars, ...request.env_vars };
    // Every process the sandbox runs gets these: bounded so that each still has room for its own.
    const environment = environmentProblem(envVars, 'env_vars');
    if (environment !== undefined) throw invalidField(environment, 'env_vars');
    // Its ports ask for its access token: a sandbox without one cannot keep them to its clients.
    if (request.allow_public_traffic === false && request.secure === false)
      throw invalidField('allow_public_traffic false needs a secure sandbox: its ports ask for its access token', 'allow_public_traffic');
    const volumes = await this.plannedVolumes(request.volume_mounts ?? [], request.api_key);
    return {
      id: randomId(),
      template,
      backend,
      python: fromImage ? IMAGE_PYTHON : await this.hostPython(),
      ...(fromImage && {
        image: { layers: await this.imageTemplates.layers(fromImage), writableBytes: config.templates.writableLayerBytes, env: imageEnvironment(fromImage.config.env) },
      }),
      envVars,
      metadata: request.metadata ?? {},
      network,
      timeoutMs: timeoutSeconds * 1000,
      accessToken: request.secure === false ? null : randomBytes(24).toString('base64url'),
      publicTraffic: request.allow_public_traffic !== false,
      maskRequestHost: request.mask_request_host ?? null,
      memoryBytes: named.memoryBytes ?? settings.memoryBytes,
      maxProcesses: settings.maxProcesses,
      maxOpenFiles: config.runJob.maxOpenFiles,
      cpuCores: named.cpuCores ?? config.runJob.cpuCores,
      home: SANDBOX_HOME,
      homeBytes: settings.homeBytes,
      maxFileBytes: settings.maxFileBytes,
      outputWindowBytes: settings.streams.outputWindowBytes,
      startTimeoutSeconds: settings.startTimeoutSeconds,
      heartbeatMs: settings.heartbeatSeconds * 1000,
      maxLifetimeMs: settings.maxTimeoutSeconds * 1000,
      onTimeout: request.on_timeout ?? 'kill',
      ...(request.on_timeout_keep_memory !== undefined && { onTimeoutKeepMemory: request.on_timeout_keep_memory }),
      ...(request.auto_resume === true && { autoResume: true }),
      ...(request.api_key !== undefined && { apiKey: request.api_key }),
      ...(volumes.length > 0 && { volumes }),
    };
  }

  /** The host's python, which a sandbox on the host's system runs its agent and kernels with. */
  private async hostPython(): Promise<SandboxPlan['python']> {
    const toolchain = await this.runtime.toolchains.get(python);
    if (isMissing(toolchain)) throw new CodedError(contractError('backend.unavailable', `sandboxes need python here: ${toolchain.message}`), { http_status: 503 });
    return { executable: toolchain.executable, mounts: toolchain.mounts };
  }

  /** The volumes a create names, the key's own, each mounted on the host, at paths that do not overlap. */
  private async plannedVolumes(mounts: readonly VolumeMount[], apiKey: string | undefined): Promise<PlannedVolume[]> {
    if (mounts.length === 0) return [];
    if (!this.volumes) throw invalidField('this server keeps no volumes', 'volume_mounts');
    const planned: PlannedVolume[] = [];
    for (const mount of mounts) {
      const path = posix.resolve(mount.path);
      const problem = mountPathProblem(path, planned);
      if (problem) throw invalidField(`volume ${mount.volume} at ${mount.path}: ${problem}`, 'volume_mounts');
      const { id } = await this.volumes.find(mount.volume, apiKey);
      planned.push({ id, source: await this.volumes.mountPath(id), path, readOnly: mount.read_only === true });
    }
    return planned;
  }
}

/** Where a volume may not be mounted: over the system, the sandbox's home itself, or another volume. */
export function mountPathProblem(path: string, others: readonly PlannedVolume[]): string | undefined {
  if (path === '/' || path === SANDBOX_HOME || SANDBOX_HOME.startsWith(`${path}/`) || SYSTEM_PATHS.some((system) => path === system || path.startsWith(`${system}/`))) {
    return 'that path belongs to the system, or is the home or holds it';
  }
  const overlapping = others.find((other) => other.path === path || path.startsWith(`${other.path}/`) || other.path.startsWith(`${path}/`));
  return overlapping && `it overlaps volume ${overlapping.id} at ${overlapping.path}`;
}

/** The sandbox's system and the kernel's trees: a volume over them would hide what the sandbox runs on. */
const SYSTEM_PATHS = ['/usr', '/bin', '/sbin', '/lib', '/lib64', '/etc', '/proc', '/sys', '/dev', '/run'];

/**
 * The internet as the sandbox's backend gives it: egress to anywhere but the host, as a run
 * job's "allow" (runner/network-admission.ts); where the backend has no user-mode networking
 * (gVisor, the microVM), its egress proxy for any name, which refuses the host and private
 * ranges as it does for a job's allowed names. No secrets: a sandbox is given none.
 */
export function internetOn(backend: SandboxBackend): SandboxNetwork {
  const modes = backend.capabilities.network;
  return modes.includes('proxy') && !modes.includes('egress') ? { proxy: { domains: [ANY_NAME], secrets: [] } } : { allow: null };
}

/**
 * An image's own python, found on its PATH, for what runs by python in a sandbox on it: the code
 * interpreter's kernels, a pause's file archive (its agent is the static one). An image without
 * one runs neither, and says so (interpreter/code-contexts.ts).
 */
const IMAGE_PYTHON: SandboxPlan['python'] = { executable: 'python3', mounts: [] };

/** 24 characters of [0-9a-z], each uniform (about 124 bits): a sandbox's id is also the name its envd is reached by. */
export function randomId(): string {
  const alphabet = '0123456789abcdefghijklmnopqrstuvwxyz';
  return Array.from({ length: 24 }, () => alphabet[randomInt(alphabet.length)]).join('');
}
