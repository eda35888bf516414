import { createHash } from 'node:crypto';
import { lstatSync, mkdirSync, readdirSync, readlinkSync, realpathSync, rmSync } from 'node:fs';
import { join, posix, resolve, sep } from 'node:path';
import type { TemplateStoreSettings } from '../config/schema.js';
import { CodedError, contractError } from '../contract/errors.js';
import type { ImageRunConfig } from '../contract/templates.js';
import { parseImageReference } from '../images/image-reference.js';
import type { StoredImage } from '../images/image-store.js';
import { imageEnvironment } from '../images/image-manifest.js';
import { IMAGE_IDS, IMAGE_ROOT_HELPER, shiftKeptLayer } from '../images/image-root.js';
import type { SandboxBackend, SandboxNetwork, SandboxTemplate } from '../isolation/types.js';
import { ownedName, reapDeadOwners } from '../isolation/host/owned-dirs.js';
import { isAlive } from '../isolation/host/process-tree.js';
import { mountScratchDisk } from '../isolation/host/scratch-disk.js';
import { unmountLazily, unmountOrphans } from '../isolation/host/tmpfs.js';
import { withSandboxUser } from './sandbox-user.js';
import { imageTable, readRegular, resolveInImage, storeEntriesLayer, type TarEntry } from './image-tree.js';
import { flagsOf, invalid, keyValues, parseDockerfile, splitWords, substitute, type Instruction } from './dockerfile.js';
import type { TemplateStart } from '../contract/templates.js';
import type { ImageTemplate } from './image-template.js';
import type { RegistryCredentials, TemplateRegistry } from './template-registry.js';

/** What a build says as it goes: each step as it starts (cached or run), and a RUN's output. */
export interface BuildListener {
  step(step: BuildStep): void;
  output(chunk: Buffer): void;
}

export interface BuildStep {
  line: number;
  instruction: string;
  /** Its layer (or nothing to make) was there already: an unchanged rebuild runs no step. */
  cached: boolean;
}

export interface BuildOptions {
  /** Build arguments (`ARG NAME` takes its value from here first). */
  args?: Readonly<Record<string, string>>;
  /** Runs every step again, replacing the layers it made before. */
  noCache?: boolean;
  /** What the template's sandboxes start with (an E2B build's start and ready commands). */
  start?: TemplateStart;
  /** The FROM image's registry's credentials for this build (E2B's fromImageRegistry), before the configured ones; never kept. */
  registryCredentials?: RegistryCredentials;
  /** The build's id as its client knows it (E2B's build ID), kept in the template's record. */
  buildId?: string;
}

/** A build's state after each instruction: its layers, its image config, and its cache key. */
interface Stage {
  layers: StoredImage['layers'];
  config: ImageRunConfig;
  /** A digest of everything so far: a layer made by the next step is stored under it and the step. */
  key: string;
  args: Record<string, string>;
}

/** Memory, processes and time a RUN step may use. */
const STEP_LIMITS = { memoryMechanism: 'cgroup', maxProcesses: 1024, maxOpenFiles: 4096, maxFileBytes: 8 * 1024 * 1024 * 1024 } as const;
/** Where a build's sandbox sees the static helper that drops a RUN to the user. */
const AS_USER_PATH = '/.agent-runner/image-root';
const DEFAULT_PATH = 'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/**
 * Builds a template from a Dockerfile and its context directory. Each RUN runs in a sandbox of
 * the build (local_process, on the layers so far, as root unless USER says the user), whose
 * writable layer is kept and becomes the step's layer; COPY and ADD make a layer of the
 * context's files through the layer unpacker; WORKDIR makes its directory. Every layer is stored
 * under a key of the step and everything before it, so an unchanged rebuild runs nothing.
 */
export class TemplateBuilder {
  constructor(
    private readonly templates: TemplateRegistry,
    private readonly backend: SandboxBackend,
    private readonly settings: TemplateStoreSettings & { memoryBytes: number },
  ) {}

  /** Builds template `name` from a Dockerfile, its COPY sources in `contextDir`. */
  build(name: string, dockerfile: string, contextDir: string, listener: BuildListener, options: BuildOptions = {}): Promise<ImageTemplate> {
    const context = resolve(contextDir);
    return this.buildInstructions(name, `dockerfile:${name}`, parseDockerfile(dockerfile), () => context, listener, options);
  }

  /**
   * Builds template `name` from instructions as a Dockerfile's are read (E2B's builder steps are
   * made into them); `contextOf` is the directory a COPY takes its sources from. Its image is
   * recorded as from `source`; a template of the name is made (or replaced) only at the end.
   */
  buildInstructions(
    name: string,
    source: string,
    instructions: readonly Instruction[],
    contextOf: (instruction: Instruction) => string,
    listener: BuildListener,
    options: BuildOptions = {},
    apiKey?: string,
  ): Promise<ImageTemplate> {
    // Its cached and new layers are recorded in an image only at the end: held from removal till then.
    return this.templates.images.holding(() => this.buildHeld(name, source, instructions, contextOf, listener, options, apiKey));
  }

  private async buildHeld(
    name: string,
    source: string,
    instructions: readonly Instruction[],
    contextOf: (instruction: Instruction) => string,
    listener: BuildListener,
    options: BuildOptions,
    apiKey: string | undefined,
  ): Promise<ImageTemplate> {
    // A build that died left its steps' disks mounted there: unmounted and removed, once a build.
    mkdirSync(this.buildsDir, { recursive: true, mode: 0o700 });
    await unmountOrphans(this.buildsDir, isAlive);
    await reapDeadOwners(this.buildsDir);
    let stage = null as Stage | null;
    const args: Record<string, string> = {};
    for (const instruction of instructions) {
      if (instruction.keyword === 'ARG') {
        for (const [key, value] of keyValues(instruction, false)) args[key] = options.args?.[key] ?? stage?.args[key] ?? value;
        if (stage) stage = { ...stage, args: { ...stage.args, ...args } };
        listener.step({ line: instruction.line, instruction: `ARG ${instruction.text}`, cached: true });
        continue;
      }
      if (instruction.keyword === 'FROM') {
        stage = await this.from(substitute(instruction.text, args), args, options.registryCredentials);
        listener.step({ line: instruction.line, instruction: `FROM ${instruction.text}`, cached: true });
        continue;
      }
      stage = await this.apply(stage!, instruction, contextOf(instruction), listener, options);
    }
    const final = stage!;
    if (options.start) await this.checkStart(final, options.start, (instructions.at(-1)?.line ?? 0) + 1, listener);
    const image = await this.templates.images.record({
      digest: `sha256:${hash([final.key, final.config])}`,
      source,
      config: final.config,
      layers: final.layers,
    });
    return this.templates.fromImage(name, image, apiKey, options.start, options.buildId);
  }

  private async from(text: string, args: Record<string, string>, credentials: RegistryCredentials | undefined): Promise<Stage> {
    const [reference] = splitWords(text);
    const empty: ImageRunConfig = { env: [DEFAULT_PATH], entrypoint: null, cmd: null, workingDir: null, user: null, exposedPorts: [], labels: {} };
    if (!reference) throw invalid('FROM names no image', 1, 'FROM');
    if (reference === 'scratch') return { layers: [], config: empty, key: hash(['scratch']), args: { ...args } };
    const template = await this.templates.lookup(reference);
    const image = template ? this.templates.images.image(template.image) : await this.templates.pullImage(parseImageReference(reference), credentials);
    if (!image) throw new CodedError(contractError('template.not_found', `FROM ${reference}: template ${reference}'s image is no longer stored`));
    return {
      // E2B's `user` added where the image has none, as E2B's builds do: its steps may run as the user.
      layers: await withSandboxUser(this.templates.images, image.layers),
      config: { ...image.config, env: image.config.env.length > 0 ? image.config.env : [DEFAULT_PATH] },
      key: hash(['from', image.digest, 'with the sandbox user']),
      args: { ...args },
    };
  }

  private async apply(stage: Stage, instruction: Instruction, context: string, listener: BuildListener, options: BuildOptions): Promise<Stage> {
    const variables = { ...stage.args, ...imageEnvironment(stage.config.env) };
    const announce = (cached: boolean) => listener.step({ line: instruction.line, instruction: `${instruction.keyword} ${instruction.text}`, cached });
    const config = { ...stage.config };
    switch (instruction.keyword) {
      case 'ENV': {
        const env = imageEnvironment(config.env);
        for (const [key, value] of keyValues(instruction, true)) env[key] = substitute(value, variables);
        config.env = Object.entries(env).map(([key, value]) => `${key}=${value}`);
        break;
      }
      case 'LABEL':
        config.labels = { ...config.labels, ...Object.fromEntries(keyValues(instruction, false).map(([key, value]) => [key, substitute(value, variables)])) };
        break;
      case 'EXPOSE':
        config.exposedPorts = [
          ...new Set([...config.exposedPorts, ...splitWords(substitute(instruction.text, variables)).map((port) => (port.includes('/') ? port : `${port}/tcp`))]),
        ];
        break;
      case 'USER': {
        const user = substitute(instruction.text, variables).trim();
        // Refused here if the image names no such account, not when a RUN after it starts.
        imageAccount(this.trees(stage), user, instruction);
        config.user = user;
        break;
      }
      case 'CMD':
      case 'ENTRYPOINT': {
        const command = instruction.json ?? ['/bin/sh', '-c', instruction.text];
        if (instruction.keyword === 'CMD') config.cmd = command;
        else config.entrypoint = command;
        break;
      }
      case 'WORKDIR': {
        const dir = resolveInImage(this.trees(stage), posix.resolve(config.workingDir ?? '/', substitute(instruction.text, variables)), true);
        config.workingDir = dir;
        const key = hash([stage.key, 'WORKDIR', dir]);
        const cached = await this.layerFromTar(key, stage, [{ name: dir.slice(1), directory: true }], options);
        announce(cached);
        return { ...stage, config, key, layers: [...stage.layers, await this.layerOf(key)] };
      }
      case 'COPY':
      case 'ADD': {
        const { flags, rest } = flagsOf(instruction, ['chown', 'chmod']);
        const words = instruction.json ?? splitWords(substitute(rest, variables));
        if (words.length < 2) throw invalid(`line ${instruction.line}: ${instruction.keyword} needs a source and a destination`, instruction.line, instruction.keyword);
        const sources = words.slice(0, -1);
        if (sources.some((source) => /^[a-z]+:\/\//i.test(source)))
          throw invalid(`line ${instruction.line}: ADD of a URL is not built here: only local files`, instruction.line, instruction.keyword);
        const destIsDir = words.at(-1)!.endsWith('/') || sources.length > 1;
        // Into the image's own directories: through its links (`/bin` -> `usr/bin`), never over them.
        const trees = this.trees(stage);
        const dest = resolveInImage(trees, posix.resolve(config.workingDir ?? '/', words.at(-1)!), destIsDir);
        const entries = contextEntries(context, sources, dest, destIsDir, flags, ownerOf(flags.chown, trees, instruction), instruction);
        const key = hash([stage.key, instruction.keyword, entries.map((entry) => ({ ...entry, content: entry.content && hash([entry.content.toString('base64')]) }))]);
        const cached = await this.layerFromTar(key, stage, entries, options);
        announce(cached);
        return { ...stage, key, layers: [...stage.layers, await this.layerOf(key)] };
      }
      case 'RUN': {
        const argv = instruction.json ?? ['/bin/sh', '-c', instruction.text];
        const key = hash([stage.key, 'RUN', argv, config.env, config.workingDir, config.user, stage.args]);
        const cached = this.templates.images.hasLayer(key) && !options.noCache;
        announce(cached);
        if (!cached) await this.run(stage, argv, key, variables, listener);
        return { ...stage, key, layers: [...stage.layers, await this.layerOf(key)] };
      }
      default:
        break;
    }
    announce(true);
    return { ...stage, config, key: hash([stage.key, instruction.keyword, config]) };
  }

  /**
   * Runs a RUN step in a sandbox on the layers so far, keeping its writable layer as the step's.
   * The layer is written on a file system of its own (a scratch disk: ext4 in a sparse file) no
   * larger than what the image may still grow by, so a step that writes too much fills it and
   * fails (ENOSPC) instead of the host's disk.
   */
  private async run(stage: Stage, argv: string[], key: string, variables: Record<string, string>, listener: BuildListener): Promise<void> {
    const store = this.templates.images;
    const budget = store.maxImageBytes - stage.layers.reduce((sum, layer) => sum + layer.bytes, 0);
    const dir = join(this.buildsDir, ownedName());
    const staging = join(dir, 'disk');
    mkdirSync(staging, { recursive: true, mode: 0o700 });
    let mounted = false;
    try {
      await mountScratchDisk(staging, join(dir, 'disk.img'), Math.max(budget, MIN_STEP_DISK_BYTES));
      mounted = true;
      await this.runInStage(
        stage,
        argv,
        variables,
        listener,
        { layers: this.trees(stage), writableBytes: 1, keepWritableIn: staging },
        {
          what: `RUN ${argv.join(' ')}`,
          timeoutSeconds: this.settings.buildStepTimeoutSeconds,
          setting: 'buildStepTimeoutSeconds',
        },
      );
      await shiftKeptLayer(staging);
      // What the sandbox's setup made there (the helper's mount point) is not the step's.
      rmSync(join(staging, 'upper', AS_USER_PATH.split('/')[1]!), { recursive: true, force: true });
      await store.adoptLayer(key, join(staging, 'upper'), budget);
    } finally {
      if (mounted) await unmountLazily(staging);
      rmSync(dir, { recursive: true, force: true });
    }
  }

  /**
   * Runs `argv` in a sandbox of the build on the stage's image, as its USER, with the build's
   * network, until it exits or its timeout; anything but exit 0 fails the build, quoting its last
   * output. The caller says where its writable layer goes.
   */
  private async runInStage(
    stage: Stage,
    argv: readonly string[],
    variables: Record<string, string>,
    listener: BuildListener,
    image: NonNullable<SandboxTemplate['image']>,
    step: { what: string; timeoutSeconds: number; setting: string },
  ): Promise<void> {
    const account = stage.config.user === null ? ROOT_ACCOUNT : imageAccount(this.trees(stage), stage.config.user, null);
    const asUser = account.uid !== 0;
    const network: SandboxNetwork = this.settings.buildInternetAccess && this.backend.capabilities.network.includes('egress') ? { allow: null } : 'none';
    const prepared = await this.backend.prepare({
      profile: 'run-job',
      // As the user: dropped to by the static helper, bound in, as the image may have no su.
      argv: asUser ? [AS_USER_PATH, 'as-user', '--uid', String(account.uid), '--gid', String(account.gid), '--', ...argv] : [...argv],
      cwd: stage.config.workingDir ?? '/',
      env: { ...imageEnvironment(stage.config.env), ...pick(variables, Object.keys(stage.args)), HOME: account.home },
      mounts: asUser ? [{ host: IMAGE_ROOT_HELPER, sandbox: AS_USER_PATH, writable: false }] : [],
      files: [],
      limits: { ...STEP_LIMITS, memoryBytes: this.settings.memoryBytes },
      network,
      user: 'user',
      rootInside: true,
      terminals: true,
      image,
    });
    const tail: Buffer[] = [];
    const sink = {
      write(chunk: Buffer) {
        listener.output(chunk);
        tail.push(chunk);
        if (tail.length > 64) tail.shift();
      },
    };
    const outcome = await prepared.start({ timeoutMs: step.timeoutSeconds * 1000, stdout: sink, stderr: sink });
    await prepared.release?.();
    if (outcome.exitCode !== 0 || outcome.timedOut) {
      const why = outcome.timedOut ? `ran past templates.${step.setting} (${step.timeoutSeconds} s)` : `exited ${outcome.exitCode ?? outcome.signal}`;
      throw new CodedError(contractError('template.build_failed', `${step.what} ${why}: ${Buffer.concat(tail).toString('utf8').slice(-2000)}`, { exit_code: outcome.exitCode }));
    }
  }

  /**
   * A template with a start command is built only if it becomes ready, as E2B's builder checks: a
   * sandbox of the finished image starts it and runs its ready command until it exits 0, for at
   * most templates.readyTimeoutSeconds. Its writable layer is thrown away with it.
   */
  private async checkStart(stage: Stage, start: TemplateStart, line: number, listener: BuildListener): Promise<void> {
    if (start.ready === null) return;
    listener.step({ line, instruction: `START ${start.command} (ready when: ${start.ready})`, cached: false });
    const argv = ['/bin/sh', '-c', '/bin/sh -c "$1" & until /bin/sh -c "$2"; do sleep 0.25; done', 'start', start.command, start.ready];
    const image = { layers: this.trees(stage), writableBytes: this.settings.writableLayerBytes };
    await this.runInStage(stage, argv, stage.args, listener, image, {
      what: `the start command ${JSON.stringify(start.command)}, ready when ${JSON.stringify(start.ready)},`,
      timeoutSeconds: this.settings.readyTimeoutSeconds,
      setting: 'readyTimeoutSeconds',
    });
  }

  /** The layer of `entries` (a COPY's files, a WORKDIR's directory), stored under `key`; true when it was there. */
  private async layerFromTar(key: string, stage: Stage, entries: TarEntry[], options: BuildOptions): Promise<boolean> {
    const store = this.templates.images;
    if (store.hasLayer(key) && !options.noCache) return true;
    await storeEntriesLayer(store, key, this.trees(stage), entries, options.noCache === true);
    return false;
  }

  /** Where the disks of RUN steps are mounted while they run: a directory of each step's, named by its process. */
  private get buildsDir(): string {
    return join(this.templates.dir, 'builds');
  }

  private trees(stage: Stage): string[] {
    return this.templates.images.layerTrees({ layers: stage.layers } as StoredImage);
  }

  private async layerOf(key: string): Promise<StoredImage['layers'][number]> {
    return this.templates.images.storedLayer(`sha256:${key}`);
  }
}

/**
 * The context's files a COPY names, under `dest` in the image. A source is a path inside the
 * context (`..` and absolute paths refused: a build sees its context only); a directory is copied
 * by its contents; links are copied as links, never followed.
 */
function contextEntries(
  context: string,
  sources: string[],
  dest: string,
  destIsDir: boolean,
  flags: Record<string, string>,
  owner: { uid?: number; gid?: number },
  instruction: Instruction,
): TarEntry[] {
  const mode = flags.chmod === undefined ? undefined : Number.parseInt(flags.chmod, 8);
  const entries: TarEntry[] = [];
  const add = (host: string, name: string) => {
    const stat = lstatSync(host);
    const base = { name: name.slice(1), ...owner };
    if (stat.isSymbolicLink()) entries.push({ ...base, linkname: readlinkSync(host) });
    else if (stat.isDirectory()) {
      if (name !== '/') entries.push({ ...base, directory: true, mode: mode ?? stat.mode & 0o7777 });
      for (const child of readdirSync(host).sort()) add(join(host, child), posix.join(name, child));
    } else if (stat.isFile()) entries.push({ ...base, content: readRegular(host), mode: mode ?? stat.mode & 0o7777 });
  };
  const root = realpathSync(context);
  for (const source of sources) {
    // Resolved with its links as Docker takes a source (a link to a file copies the file), and
    // then inside the context still: a link out of it copies nothing of the host.
    let host: string;
    try {
      host = realpathSync(resolve(context, source));
    } catch {
      throw invalid(`line ${instruction.line}: ${instruction.keyword} ${source}: no such file in the build context`, instruction.line, instruction.keyword);
    }
    if (source.startsWith('/') || (host !== root && !host.startsWith(root + sep)))
      throw invalid(`line ${instruction.line}: ${instruction.keyword} ${source}: a source is a path inside the build context`, instruction.line, instruction.keyword);
    const stat = lstatSync(host);
    add(host, stat.isDirectory() ? dest : destIsDir ? posix.join(dest, posix.basename(resolve(context, source))) : dest);
  }
  return entries;
}

function ownerOf(chown: string | undefined, trees: readonly string[], instruction: Instruction): { uid?: number; gid?: number } {
  if (chown === undefined) return {};
  const { uid, gid } = imageAccount(trees, chown, instruction);
  return { uid, gid };
}

interface Account {
  uid: number;
  gid: number;
  home: string;
}

/** The smallest disk a RUN step writes on (ext4's own structures take some of it). */
const MIN_STEP_DISK_BYTES = 64 * 1024 * 1024;

const ROOT_ACCOUNT: Account = { uid: 0, gid: 0, home: '/root' };

/**
 * USER's or --chown's `user[:group]`, each a name the image's /etc/passwd (/etc/group) holds or a
 * number, as Docker reads them: a user's group is its passwd entry's unless one is given, its home
 * is its entry's (`/` for a number the image does not name). `instruction` null: checked before.
 */
function imageAccount(trees: readonly string[], spec: string, instruction: Instruction | null): Account {
  const refuse = (why: string): never => {
    if (!instruction) throw new Error(`${spec}: ${why}`);
    throw invalid(`line ${instruction.line}: ${instruction.keyword} ${spec}: ${why}`, instruction.line, instruction.keyword);
  };
  const [user = '', group] = spec.split(':');
  const passwd = imageTable(trees, '/etc/passwd');
  const entry = passwd.find((fields) => fields[0] === user || (/^\d+$/.test(user) && fields[2] === user));
  const uid = /^\d+$/.test(user) ? Number(user) : entry ? Number(entry[2]) : refuse(`the image's /etc/passwd has no user ${user}`);
  let gid = entry ? Number(entry[3]) : uid;
  if (group !== undefined) {
    const named = imageTable(trees, '/etc/group').find((fields) => fields[0] === group);
    gid = /^\d+$/.test(group) ? Number(group) : named ? Number(named[2]) : refuse(`the image's /etc/group has no group ${group}`);
  }
  if (!(uid < IMAGE_IDS && gid < IMAGE_IDS)) refuse(`ids from 0 to ${IMAGE_IDS - 1} only`);
  return { uid, gid, home: entry?.[5] || (uid === 0 ? '/root' : '/') };
}

function pick(variables: Record<string, string>, names: string[]): Record<string, string> {
  return Object.fromEntries(names.filter((name) => variables[name] !== undefined).map((name) => [name, variables[name]!]));
}

function hash(value: unknown): string {
  return createHash('sha256').update(JSON.stringify(value)).digest('hex');
}
