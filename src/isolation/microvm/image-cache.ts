import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { mkdir, readdir, rename, rm, rmdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { processIdentity, SELF_IDENTITY } from '../../util/process-identity.js';
import { reapDeadOwners } from '../host/owned-dirs.js';
import { removeTree } from '../host/tree-removal.js';

/**
 * The microVM cache keeps, for each guest image, the image (images/<id>/), the accelerator it
 * runs with (images/<id>.accel.json) and its snapshots (snapshots/<id>-<shape>/): about 0.4 GB
 * on disk. A new image is made whenever its inputs change (this package upgraded or rebuilt, a
 * Debian package installed), and the old ones stayed: a day of builds on one machine left 36
 * images and their snapshots, 14 GB. A process that uses an image claims it, with a file named
 * after itself under images/<id>.users/, before it looks for the image; an image that no living
 * process claims or has open goes, with everything of it, when another image is current. Claims
 * are read in this process's PID namespace: processes sharing a cache must share that too.
 */

/** An image's directory: its key (guest-image.ts). */
const IMAGE_ID = /^[0-9a-f]{24}$/;

/** Claims the image `id` for this process until the release it returns is called (or the process ends). */
export async function claimImage(imagesDir: string, id: string): Promise<() => Promise<void>> {
  const users = join(imagesDir, `${id}.users`);
  // One process may hold several backends on the same image: each claim is its own file.
  const claim = join(users, `${SELF_IDENTITY}-${randomBytes(4).toString('hex')}`);
  for (let attempt = 1; ; attempt += 1) {
    await mkdir(users, { recursive: true, mode: 0o755 });
    try {
      await writeFile(claim, '');
      return () => rm(claim, { force: true });
    } catch (error) {
      // A pruner removed the folder, empty, between the two steps: made again.
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT' || attempt === 3) throw error;
    }
  }
}

/**
 * Removes every image but `current` that no living process claims and none has open (a process
 * of a release before claims, with VMs running), with its snapshots and its accelerator choice;
 * then what is left of images that are gone (claims, accelerator choices, snapshots), and what
 * builders that died left half made. Returns the removed image ids.
 */
export async function pruneImages(cacheDir: string, current: string): Promise<string[]> {
  const imagesDir = join(cacheDir, 'images');
  const snapshotsDir = join(cacheDir, 'snapshots');
  const snapshotsOf = async (id: string) => (await readdir(snapshotsDir).catch(() => [])).filter((name) => name.startsWith(`${id}-`) && !name.includes('.'));
  const unused = async (id: string) =>
    !(await claimed(join(imagesDir, `${id}.users`))) && !openedByAnyProcess([join(imagesDir, id), ...(await snapshotsOf(id)).map((name) => join(snapshotsDir, name))]);
  const removed: string[] = [];
  for (const id of (await readdir(imagesDir).catch(() => [])).filter((name) => IMAGE_ID.test(name) && name !== current)) {
    if (!(await unused(id))) continue;
    // Moved aside, then the claims read again: a process claims before it looks for the image,
    // so one that claimed after the second reading finds no image under the name and builds its
    // own, and one that claimed before it gets the image back.
    const aside = join(imagesDir, `${id}.removing-${SELF_IDENTITY}`);
    const moved = await rename(join(imagesDir, id), aside).then(
      () => true,
      () => false,
    );
    if (!moved) continue;
    if (await claimed(join(imagesDir, `${id}.users`))) {
      await rename(aside, join(imagesDir, id)).catch(() => removeTree(aside));
      continue;
    }
    for (const name of await snapshotsOf(id)) await removeTree(join(snapshotsDir, name));
    await rm(join(imagesDir, `${id}.accel.json`), { force: true });
    // Left while a claim made since is in it: its process is building the image again.
    await rmdir(join(imagesDir, `${id}.users`)).catch(() => undefined);
    await removeTree(aside);
    removed.push(id);
  }
  // What is left of images that are gone, unless a living process claims the image (it is
  // building it): the claims of processes that died before it was whole, and accelerator
  // choices (of an image removed by hand, or by a pruner that died between the two).
  for (const name of await readdir(imagesDir).catch(() => [])) {
    const [id, suffix] = [name.slice(0, 24), name.slice(24)];
    if (!IMAGE_ID.test(id) || !['.users', '.accel.json'].includes(suffix) || id === current || existsSync(join(imagesDir, id))) continue;
    if (await claimed(join(imagesDir, `${id}.users`))) continue;
    await (suffix === '.users' ? rmdir(join(imagesDir, name)) : rm(join(imagesDir, name), { force: true })).catch(() => undefined);
  }
  // A pruner that died between the image and its snapshots left them without it.
  for (const name of await readdir(snapshotsDir).catch(() => [])) {
    const id = name.slice(0, 24);
    if (!IMAGE_ID.test(id) || id === current || name.includes('.') || existsSync(join(imagesDir, id)) || !(await unused(id))) continue;
    await removeTree(join(snapshotsDir, name));
  }
  // What builders and pruners that died left half made: images `<id>.building-<pid>` and
  // `<id>.removing-<pid>.<start>`, snapshots `<name>.<pid>-<hex>`.
  await reapDeadOwners(imagesDir, pidIn(/^[0-9a-f]{24}\.(?:building-(\d+)|removing-(\d+)\.\d+)$/));
  await reapDeadOwners(snapshotsDir, pidIn(/^[0-9a-f]{24}-[^.]+\.(\d+)-[0-9a-f]+$/));
  return removed;
}

/** Whether a process has one of `paths`, or a file under one, open or mapped (QEMU: the root drive, the snapshot's memory). */
export function openedByAnyProcess(paths: readonly string[]): boolean {
  const inside = (path: string) => paths.some((held) => path === held || path.startsWith(`${held}/`));
  for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    try {
      if (readdirSync(`/proc/${pid}/fd`).some((fd) => inside(readlinkSafe(`/proc/${pid}/fd/${fd}`)))) return true;
      if (
        readFileSync(`/proc/${pid}/maps`, 'utf8')
          .split('\n')
          .some((line) => inside(line.slice(line.indexOf('/'))))
      )
        return true;
    } catch {
      // Gone meanwhile, or not ours to read.
    }
  }
  return false;
}

function readlinkSafe(path: string): string {
  try {
    return readlinkSync(path);
  } catch {
    return '';
  }
}

/** Whether a living process claims the image; the claims of dead ones are removed on the way. */
async function claimed(users: string): Promise<boolean> {
  let live = false;
  for (const name of await readdir(users).catch(() => [])) {
    const identity = name.slice(0, name.lastIndexOf('-'));
    if (processIdentity(Number(identity.split('.')[0])) === identity) live = true;
    else await rm(join(users, name), { force: true });
  }
  return live;
}

/** The pid `pattern` captures in a name (its first group that matched); NaN for a name it does not match. */
function pidIn(pattern: RegExp): (name: string) => number {
  return (name) => {
    const match = pattern.exec(name);
    return Number(match?.[1] ?? match?.[2]);
  };
}
