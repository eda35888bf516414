import { createHmac, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { closeSync, createReadStream, createWriteStream, existsSync, mkdirSync, openSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { CodedError, contractError } from '../contract/errors.js';
import type { E2bBuildLogEntry, E2bTemplateBuildInfo, E2bTemplateBuildStart, E2bTemplateRequestResponse } from '../contract/e2b.js';
import { isGzip } from '../images/image-archive.js';
import { ecrCredentials } from '../images/ecr-token.js';
import { unpackLayer } from '../images/layer-unpack.js';
import type { Instruction } from './dockerfile.js';
import type { TemplateBuilder } from './template-builder.js';
import { DEFAULT_TAG, keyParts, templateKey } from './template-reference.js';
import { otherKeys, type RegistryCredentials, type TemplateRegistry } from './template-registry.js';
import { visibleTo } from '../util/tenant.js';

/** One build as E2B's SDK follows it: its status and the log lines it has read so far. */
interface Build {
  templateID: string;
  buildID: string;
  /** The tags it gives its image (the name's, then those asked for); none: the default one. */
  tags: string[];
  apiKey: string | undefined;
  status: E2bTemplateBuildInfo['status'];
  entries: E2bBuildLogEntry[];
  reason?: { message: string; step?: string };
}

/** Where and how long a build's AWS key is exchanged for ECR's credentials (templates.awsEcrEndpoint). */
export interface AwsSettings {
  endpoint: string | null;
  timeoutMs: number;
}

/** Bytes of one upload of a build's files (a COPY's tar). */
const MAX_UPLOAD_BYTES = 1024 * 1024 * 1024;
/** Builds kept for their status after they ended. */
const KEPT_BUILDS = 64;

/**
 * E2B's template builds (`Template.build` of the `e2b` SDK) over the Dockerfile builder: a build is
 * asked for by name, the files its COPY steps take are uploaded by their hash to a signed URL, its
 * steps (from an image or a template: RUN, COPY, ENV, WORKDIR, USER) are made into a Dockerfile's
 * instructions and built, and its status and log lines are read by polling. Builds live in the
 * process that serves them; their templates and layers in the registry, like any.
 */
export class E2bTemplateBuilds {
  private readonly builds = new Map<string, Build>();
  /** Uploads being unpacked or unpacked, by hash: each once. */
  private readonly contextDirs = new Map<string, Promise<string>>();
  private readonly secret = randomBytes(32);
  private readonly uploads: string;

  constructor(
    private readonly registry: TemplateRegistry,
    private readonly builder: () => TemplateBuilder,
    dir: string,
    private readonly aws: AwsSettings,
  ) {
    this.uploads = join(dir, 'uploads');
    mkdirSync(this.uploads, { recursive: true, mode: 0o700 });
  }

  /**
   * `POST /v3/templates`: a build of template `name`, its image given the tag `name` names after a
   * colon and `tags` (none: the default tag, as E2B's builds).
   */
  request(name: string, tags: readonly string[], apiKey: string | undefined): E2bTemplateRequestResponse {
    const [templateID, named] = name.split(':', 2) as [string, string | undefined];
    const given = [...new Set([...(named === undefined ? [] : [named]), ...tags])];
    for (const reference of [templateID, ...given.map((tag) => `${templateID}:${tag}`)])
      if (templateKey(reference) === null) throw invalid(`template ${JSON.stringify(reference)}: a name and a tag are lowercase letters, digits, '.', '_' and '-'`);
    const buildID = randomUUID();
    this.builds.set(buildID, { templateID, buildID, tags: given, apiKey, status: 'waiting', entries: [] });
    this.forgetOldBuilds();
    return { templateID, buildID, public: false, names: [templateID], tags: given.length > 0 ? given : [DEFAULT_TAG], aliases: [templateID] };
  }

  /** Whether the files of `hash` are here; if not, the path (signed) their tar is PUT to. */
  fileUpload(templateID: string, hash: string): { present: boolean; path?: string } {
    if (existsSync(this.uploadPath(hash))) return { present: true };
    return { present: false, path: `/templates/${encodeURIComponent(templateID)}/files/${hash}/upload?signature=${this.sign(hash)}` };
  }

  /** Keeps an upload whose signature is this process's for `hash`: whole or not at all. */
  async storeUpload(hash: string, signature: string, body: Readable): Promise<void> {
    const expected = Buffer.from(this.sign(hash));
    const given = Buffer.from(signature);
    if (given.length !== expected.length || !timingSafeEqual(given, expected))
      throw new CodedError(contractError('auth.unauthorized', 'the upload URL is not signed by this server'));
    const partial = `${this.uploadPath(hash)}.${randomBytes(6).toString('hex')}.partial`;
    let bytes = 0;
    try {
      await pipeline(
        body,
        async function* (chunks: AsyncIterable<Buffer>) {
          for await (const chunk of chunks) {
            bytes += chunk.length;
            if (bytes > MAX_UPLOAD_BYTES) throw new CodedError(contractError('request.too_large', `a build's files are over ${MAX_UPLOAD_BYTES} bytes`));
            yield chunk;
          }
        },
        createWriteStream(partial, { mode: 0o600, flags: 'wx' }),
      );
      renameSync(partial, this.uploadPath(hash));
    } finally {
      rmSync(partial, { force: true });
    }
  }

  /** `POST /v2/templates/{templateID}/builds/{buildID}`: starts the build; its end is read by status(). */
  start(templateID: string, buildID: string, body: E2bTemplateBuildStart, apiKey: string | undefined): void {
    const build = this.builds.get(buildID);
    if (!build || build.templateID !== templateID) throw new CodedError(contractError('template.not_found', `no build ${buildID} of template ${templateID}`));
    if (build.status !== 'waiting') throw invalid(`build ${buildID} has started already`);
    // The template of each tag it gives, as E2B's builds: a name alone is its default tag.
    const keys = (build.tags.length > 0 ? build.tags : [DEFAULT_TAG]).map((tag) => templateKey(`${templateID}:${tag}`)!);
    for (const key of keys) {
      const existing = this.registry.get(key);
      if (existing && !visibleTo(apiKey, existing.api_key)) throw otherKeys(key);
    }
    const [first, ...others] = keys as [string, ...string[]];
    const instructions = toInstructions(body);
    // Refused here, with the request, not when the build runs; used for its pull only, never kept.
    const credentials = body.fromImageRegistry && registryCredentials(body.fromImageRegistry, this.aws);
    build.status = 'building';
    const log = (message: string, level: E2bBuildLogEntry['level'] = 'info', step?: string) =>
      build.entries.push({ timestamp: new Date().toISOString(), message, level, ...(step !== undefined && { step }) });
    let pending = '';
    const run = async () => {
      await this.prepareUploads(body);
      const built = await this.builder().buildInstructions(
        first,
        `e2b:${templateID}`,
        instructions,
        (instruction) => this.contextOf(instruction),
        {
          step: (step) => log(`${step.cached ? 'CACHED ' : ''}[${step.line}] ${step.instruction}`, 'info', String(step.line)),
          output: (chunk) => {
            const lines = (pending + chunk.toString('utf8')).split('\n');
            pending = lines.pop()!;
            for (const line of lines) log(line);
          },
        },
        {
          noCache: body.force === true,
          buildId: buildID,
          ...(body.startCmd && { start: { command: body.startCmd, ready: body.readyCmd ?? null } }),
          ...(credentials && { registryCredentials: await credentials() }),
        },
        apiKey,
      );
      if (others.length > 0)
        await this.registry.assignTags(
          built.name,
          others.map((key) => keyParts(key).tag),
          apiKey,
        );
    };
    void run().then(
      () => {
        if (pending) log(pending);
        log('build finished');
        build.status = 'ready';
      },
      (error: unknown) => {
        if (pending) log(pending);
        const message = error instanceof Error ? error.message : String(error);
        log(message, 'error');
        build.reason = { message, ...(error instanceof CodedError && typeof error.error.details?.line === 'number' && { step: String(error.error.details.line) }) };
        build.status = 'error';
      },
    );
  }

  /** `GET /templates/{templateID}/builds/{buildID}/status`: the status, and the log lines from `logsOffset` on. */
  status(templateID: string, buildID: string, logsOffset: number): E2bTemplateBuildInfo {
    const build = this.builds.get(buildID);
    if (!build || build.templateID !== templateID) throw new CodedError(contractError('template.not_found', `no build ${buildID} of template ${templateID}`));
    const entries = build.entries.slice(logsOffset);
    return {
      templateID,
      buildID,
      status: build.status,
      logs: entries.map((entry) => entry.message),
      logEntries: entries,
      ...(build.reason && { reason: { ...build.reason, logEntries: build.entries.slice(-20) } }),
    };
  }

  /** The directory a COPY of uploaded files takes its sources from: the upload unpacked (prepareUploads). */
  private contextOf(instruction: Instruction): string {
    const hash = instruction.filesHash;
    if (!hash) return this.uploads;
    const dir = join(this.uploads, `${hash}.d`);
    if (!existsSync(join(dir, '.complete'))) throw invalid(`the files of hash ${hash} were not uploaded`);
    return join(dir, 'tree');
  }

  /** Unpacks the uploads a build's COPY steps take, before it starts (each once). */
  private async prepareUploads(body: E2bTemplateBuildStart): Promise<void> {
    for (const step of body.steps ?? []) {
      if (step.type !== 'COPY' || !step.filesHash) continue;
      const hash = step.filesHash;
      const unpacking = this.contextDirs.get(hash) ?? this.unpackUpload(hash);
      this.contextDirs.set(hash, unpacking);
      await unpacking;
    }
  }

  private async unpackUpload(hash: string): Promise<string> {
    const dir = join(this.uploads, `${hash}.d`);
    if (existsSync(join(dir, '.complete'))) return dir;
    if (!existsSync(this.uploadPath(hash))) throw invalid(`the files of hash ${hash} were not uploaded`);
    const staging = `${dir}.${randomBytes(6).toString('hex')}`;
    mkdirSync(join(staging, 'tree'), { recursive: true, mode: 0o700 });
    try {
      // The client's tar is read by the layer unpacker: no entry leaves the directory.
      await unpackLayer(createReadStream(this.uploadPath(hash)), isGzip(this.uploadPath(hash)), join(staging, 'tree'), { maxBytes: MAX_UPLOAD_BYTES, maxEntries: 1_000_000 });
      closeSync(openSync(join(staging, '.complete'), 'w'));
      rmSync(dir, { recursive: true, force: true });
      renameSync(staging, dir);
    } finally {
      rmSync(staging, { recursive: true, force: true });
    }
    return dir;
  }

  private uploadPath(hash: string): string {
    if (!/^[A-Za-z0-9]{1,128}$/.test(hash)) throw invalid(`files hash ${JSON.stringify(hash.slice(0, 140))} is not a hash`);
    return join(this.uploads, `${hash}.tar`);
  }

  private sign(hash: string): string {
    return createHmac('sha256', this.secret).update(hash).digest('hex');
  }

  private forgetOldBuilds(): void {
    const ended = [...this.builds.values()].filter((build) => build.status === 'ready' || build.status === 'error');
    for (const build of ended.slice(0, Math.max(0, ended.length - KEPT_BUILDS))) this.builds.delete(build.buildID);
  }
}

/** E2B's steps as a Dockerfile's instructions: FROM the image or template, each step in order. */
function toInstructions(body: E2bTemplateBuildStart): Instruction[] {
  const from = body.fromImage ?? body.fromTemplate;
  if (!from) throw invalid('a build needs fromImage or fromTemplate');
  const line = (index: number) => index + 2;
  const instructions: Instruction[] = [
    { keyword: 'FROM', text: from, json: null, line: 1 },
    // E2B's builder runs its steps as root unless a step or setUser says otherwise.
    { keyword: 'USER', text: 'root', json: null, line: 1 },
  ];
  let user = 'root';
  for (const [index, step] of (body.steps ?? []).entries()) {
    const args = step.args ?? [];
    const at = line(index);
    switch (step.type) {
      case 'RUN': {
        const [command = '', runAs] = args;
        if (runAs && runAs !== user) instructions.push({ keyword: 'USER', text: runAs, json: null, line: at });
        instructions.push({ keyword: 'RUN', text: command, json: null, line: at });
        if (runAs && runAs !== user) instructions.push({ keyword: 'USER', text: user, json: null, line: at });
        break;
      }
      case 'COPY': {
        const [src = '', dest = '', owner = '', mode = ''] = args;
        const flags = [owner && `--chown=${owner}`, mode && `--chmod=${mode}`].filter(Boolean).join(' ');
        instructions.push({ keyword: 'COPY', text: flags, json: [src, dest], line: at, ...(step.filesHash && { filesHash: step.filesHash }) });
        break;
      }
      case 'ENV': {
        const pairs: string[] = [];
        for (let at2 = 0; at2 + 1 < args.length; at2 += 2) pairs.push(`${args[at2]}=${JSON.stringify(args[at2 + 1])}`);
        instructions.push({ keyword: 'ENV', text: pairs.join(' '), json: null, line: at });
        break;
      }
      case 'WORKDIR':
        instructions.push({ keyword: 'WORKDIR', text: args[0] ?? '/', json: null, line: at });
        break;
      case 'USER':
        user = args[0] ?? 'root';
        instructions.push({ keyword: 'USER', text: user, json: null, line: at });
        break;
      default:
        throw invalid(`step ${index + 1}: ${step.type} is not a step built here (RUN, COPY, ENV, WORKDIR, USER)`);
    }
  }
  return instructions;
}

/**
 * E2B's fromImageRegistry as credentials for the FROM image's registry, checked now and made when
 * the build runs: `registry` (fromImage with a user name and password) as they are; `gcp`
 * (fromGCPRegistry) as Google's registries take a service account's key, the user `_json_key`;
 * `aws` (fromAWSRegistry) exchanged for ECR's token, signed with the access key (ecr-token.ts).
 */
function registryCredentials(registry: NonNullable<E2bTemplateBuildStart['fromImageRegistry']>, aws: AwsSettings): () => Promise<RegistryCredentials> {
  const text = (name: string): string => {
    const value = (registry as Record<string, unknown>)[name];
    if (typeof value !== 'string' || value === '') throw invalid(`fromImageRegistry of type ${registry.type} needs ${name}`);
    return value;
  };
  if (registry.type === 'registry') {
    const credentials = { username: text('username'), password: text('password') };
    return async () => credentials;
  }
  if (registry.type === 'gcp') {
    const credentials = { username: '_json_key', password: text('serviceAccountJson') };
    return async () => credentials;
  }
  if (registry.type === 'aws') {
    const key = { accessKeyId: text('awsAccessKeyId'), secretAccessKey: text('awsSecretAccessKey'), region: text('awsRegion') };
    return () => ecrCredentials(key, aws.timeoutMs, aws.endpoint ?? undefined);
  }
  throw invalid(`fromImageRegistry of type ${JSON.stringify(registry.type)} is not taken here (registry, gcp and aws are)`);
}

function invalid(message: string): CodedError {
  return new CodedError(contractError('template.build_invalid', message));
}
