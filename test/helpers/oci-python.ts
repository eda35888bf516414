import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { BUSYBOX_CONFIG, busyboxLayer } from './oci-images.js';
import { TEST_STATE_DIR } from './suite-env.js';
import { layerOfTar, sha256, tarOf, treeEntries, writeLayout, type Layer, type LayerEntry, type OciImage } from './oci-layout.js';

const PYTHON = '/usr/bin/python3.11';
const STDLIB = '/usr/lib/python3.11';
/** Debian's sitecustomize.py of the stdlib is a symlink into it. */
const ETC = '/etc/python3.11';
/** Where the python layer is kept between runs (building it gzips some 20 MB): the suite's state dir, which a new machine has empty. */
const CACHE_DIR = join(TEST_STATE_DIR, 'image-fixtures');
/** What the image's python must run before the layer is kept. */
export const PYTHON_CHECK = ['/usr/bin/python3', '-c', 'import json, ssl; print(1)'] as const;

/**
 * An image with a working python3 and no bash: the busybox image's layer (busybox is /bin/sh),
 * then a layer of this host's python 3.11 (the program, its standard library without its tests,
 * __pycache__ and the static libpython of config-3.11-*, Debian's /etc/python3.11) and every
 * shared library that it and the stdlib's extension modules load, as ldd lists them, with the
 * dynamic loader. A glibc program on a root of its own: what templates from real images hold.
 */
export async function pythonImage(dir: string): Promise<OciImage> {
  const layers = [await busyboxLayer(), await pythonLayer()];
  return writeLayout(join(dir, 'python'), 'agent-runner-test/python', 'latest', [{ layers, config: { ...BUSYBOX_CONFIG, Cmd: ['/usr/bin/python3'] } }]);
}

/**
 * The python layer, from the cache when its tar (whose digest is the cache key: the inputs
 * themselves, so a changed host file or recipe makes a new one) was built and checked before.
 * Checked: the two layers unpacked run PYTHON_CHECK under chroot.
 */
async function pythonLayer(): Promise<Layer> {
  const tar = await tarOf(pythonEntries());
  const diffId = sha256(tar);
  const cached = join(CACHE_DIR, `python-layer-${diffId.slice('sha256:'.length)}.tar.gz`);
  if (existsSync(cached)) {
    const blob = readFileSync(cached);
    return { blob, digest: sha256(blob), diffId };
  }
  const layer = layerOfTar(tar);
  checkRuns([await busyboxLayer(), layer]);
  mkdirSync(CACHE_DIR, { recursive: true });
  // Renamed into place whole: another test file may be reading or writing the same entry.
  const partial = `${cached}.${process.pid}`;
  writeFileSync(partial, layer.blob);
  renameSync(partial, cached);
  return layer;
}

function pythonEntries(): LayerEntry[] {
  const extensions = readdirSync(join(STDLIB, 'lib-dynload'))
    .filter((name) => name.endsWith('.so'))
    .map((name) => join(STDLIB, 'lib-dynload', name));
  const ldd = execFileSync('ldd', [PYTHON, ...extensions], { encoding: 'utf8' });
  const libraries = [...new Set(Array.from(ldd.matchAll(/(\/\S+) \(0x/g), (match) => match[1]!))].sort();
  const skip = (name: string) => name === 'test' || name === '__pycache__' || name.startsWith('config-3.11');
  return [
    ...parentDirectories([PYTHON, STDLIB, ETC, ...libraries].map((path) => path.slice(1))),
    { name: PYTHON.slice(1), mode: 0o755, content: readFileSync(PYTHON) },
    { name: 'usr/bin/python3', type: 'symlink', linkname: 'python3.11' },
    ...treeEntries(STDLIB, STDLIB.slice(1), skip),
    ...treeEntries(ETC, ETC.slice(1)),
    // A library's path may be a symlink on the host (libz.so.1 -> libz.so.1.2.13): the file it names is copied under it.
    ...libraries.map((path): LayerEntry => ({ name: path.slice(1), mode: 0o755, content: readFileSync(path) })),
  ];
}

/** Directory entries for every directory above `names`, each once, parents first. */
function parentDirectories(names: readonly string[]): LayerEntry[] {
  const directories = new Set<string>();
  for (let name of names) while ((name = dirname(name)) !== '.') directories.add(name);
  return [...directories].sort().map((name) => ({ name, type: 'directory' }));
}

/** Unpacks `layers` in order into a temp dir and runs PYTHON_CHECK there under chroot (the suite runs as root). */
function checkRuns(layers: readonly Layer[]): void {
  const root = mkdtempSync(join(tmpdir(), 'python-image-'));
  try {
    for (const layer of layers) execFileSync('tar', ['-xz', '-C', root], { input: layer.blob });
    const printed = execFileSync('/usr/sbin/chroot', [root, ...PYTHON_CHECK], { encoding: 'utf8', env: { PATH: '/usr/bin:/bin' } });
    if (printed !== '1\n') throw new Error(`the python image printed ${JSON.stringify(printed)}, not 1`);
    if (existsSync(join(root, 'bin', 'bash'))) throw new Error('the python image has a bash');
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}
