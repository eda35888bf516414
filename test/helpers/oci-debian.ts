import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { gunzipSync } from 'node:zlib';
import { layerOfTar, sha256, writeLayout, type Layer, type OciImage } from './oci-layout.js';
import { TEST_STATE_DIR } from './suite-env.js';

const execFileAsync = promisify(execFile);

/**
 * A real Debian 12 root file system, as `debootstrap` makes it from Debian's archive (the one
 * network the suite's machines reach), with python3 and pip: an image of the kind templates are
 * built from (apt's own, glibc, bash, /etc/passwd without E2B's `user`). Its packages are apt's
 * (minbase, plus pip's Depends). As in Debian's own images (debuerreotype's), /dev holds no device
 * nodes (debootstrap makes some, which a layer may not hold) and apt's downloads and lists are
 * left out.
 */
const RECIPE = {
  suite: 'bookworm',
  variant: 'minbase',
  include: ['python3-pip'],
  mirror: 'http://deb.debian.org/debian',
  emptied: ['dev', 'var/cache/apt/archives', 'var/lib/apt/lists'],
} as const;

/**
 * The image's environment. pip refuses to install into a system python Debian manages (PEP 668's
 * EXTERNALLY-MANAGED) unless told: the image says so once, as an image whose python is the one
 * its programs use would, so that E2B's `pipInstall` (a plain `pip install` as root) works in it.
 */
const ENV = ['PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', 'PIP_BREAK_SYSTEM_PACKAGES=1'];

/**
 * Where the layer is kept: in the suite's state dir, so that a new machine (and
 * scripts/fresh-machine-check.sh, which wipes it) fills it once, in `npm test`'s preparation
 * (test/prepare-suite.ts) beside the build's checks, and every later run reads it.
 */
const CACHE_DIR = join(TEST_STATE_DIR, 'image-fixtures');

/** The Debian image, its one layer from the cache, filled first when it has none for RECIPE. */
export async function debianImage(dir: string): Promise<OciImage> {
  const layer = await debianLayer();
  return writeLayout(join(dir, 'debian'), 'agent-runner-test/debian', RECIPE.suite, [{ layers: [layer], config: { Env: ENV, Cmd: ['bash'] } }]);
}

/**
 * The layer: debootstrap's tree, checked (its python imports pip under chroot), packed by GNU tar
 * (hard links, owners by number), gzip'ed and renamed into place whole, under a name that is the
 * recipe's digest: a changed recipe makes a new one, and another run filling it at the same time
 * renames a layer as good.
 */
export async function debianLayer(): Promise<Layer> {
  const cached = join(CACHE_DIR, `debian-${sha256(JSON.stringify(RECIPE)).slice('sha256:'.length, 'sha256:'.length + 16)}.tar.gz`);
  if (existsSync(cached)) {
    const blob = readFileSync(cached);
    return { blob, digest: sha256(blob), diffId: sha256(gunzipSync(blob)) };
  }
  mkdirSync(CACHE_DIR, { recursive: true });
  const work = mkdtempSync(join(CACHE_DIR, 'debootstrap-'));
  try {
    const root = join(work, 'root');
    // In a mount namespace of its own: the /proc and /sys debootstrap mounts in the tree go with it, even when it is killed.
    const debootstrap = ['debootstrap', `--variant=${RECIPE.variant}`, `--include=${RECIPE.include.join(',')}`, RECIPE.suite, root, RECIPE.mirror];
    await execFileAsync('unshare', ['--mount', '--propagation', 'private', ...debootstrap], { maxBuffer: 64 * 1024 * 1024 });
    for (const path of RECIPE.emptied) {
      rmSync(join(root, path), { recursive: true, force: true });
      mkdirSync(join(root, path), { recursive: true });
    }
    const { stdout } = await execFileAsync('/usr/sbin/chroot', [root, '/usr/bin/python3', '-m', 'pip', '--version'], { env: { PATH: ENV[0]!.slice('PATH='.length) } });
    if (!stdout.startsWith('pip ')) throw new Error(`the Debian image's pip printed ${JSON.stringify(stdout)}`);
    const tar = join(work, 'layer.tar');
    await execFileAsync('tar', ['--create', '--file', tar, '--numeric-owner', '--sort=name', '--directory', root, '.']);
    // Level 1: the layer is some 250 MB of tar, gzip'ed once per machine; its size matters less than the minute.
    const layer = layerOfTar(readFileSync(tar), 1);
    const partial = `${cached}.${process.pid}`;
    writeFileSync(partial, layer.blob);
    renameSync(partial, cached);
    return layer;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
