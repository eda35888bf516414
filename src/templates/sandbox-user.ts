import { createHash } from 'node:crypto';
import type { ImageStore, StoredImage } from '../images/image-store.js';
import { imageEntry, imageFile, resolveInImage, storeEntriesLayer, tableOf, type TarEntry } from './image-tree.js';

/**
 * The account every sandbox's user is: E2B's `user`, uid 1000, at home in /home/user (the
 * sandbox backends run it as uid 1000, and E2B's SDKs name it and write there by default).
 */
const SANDBOX_USER = { name: 'user', id: 1000, home: '/home/user' } as const;

/**
 * The layers of an image with the sandbox's user in it, as E2B's template builds make every image
 * it is not in (`fromImage('debian')` then `setUser('user')` works there): a layer of its own on
 * top, stored once per image under a key of the layers below, with the image's /etc/passwd and
 * /etc/group with `user` added (its shell bash where the image has one) and its home, the user's.
 * The same layers where the image needs none: it names `user`, or has no /etc/passwd (the sandbox
 * is given one naming it), or its uid 1000 is an account of its own (which the sandbox's user then
 * is, as the image made it: a node image's `node`).
 */
export async function withSandboxUser(store: ImageStore, layers: StoredImage['layers']): Promise<StoredImage['layers']> {
  const trees = store.layerTrees({ layers } as StoredImage);
  const passwd = imageFile(trees, '/etc/passwd');
  if (!passwd || namesTheUser(passwd.content)) return layers;
  const shell = imageEntry(trees, resolveInImage(trees, '/bin/bash', true).slice(1))?.stat.isFile() ? '/bin/bash' : '/bin/sh';
  const entries: TarEntry[] = [appended(passwd, `${SANDBOX_USER.name}:x:${SANDBOX_USER.id}:${SANDBOX_USER.id}::${SANDBOX_USER.home}:${shell}`)];
  const group = imageFile(trees, '/etc/group');
  if (group && !namesTheUser(group.content)) entries.push(appended(group, `${SANDBOX_USER.name}:x:${SANDBOX_USER.id}:`));
  const home = resolveInImage(trees, SANDBOX_USER.home, true);
  if (!imageEntry(trees, home.slice(1))) entries.push({ name: home.slice(1), directory: true, mode: 0o755, uid: SANDBOX_USER.id, gid: SANDBOX_USER.id });
  const key = createHash('sha256')
    .update(JSON.stringify(['sandbox user', layers.map((layer) => layer.diffId)]))
    .digest('hex');
  if (!store.hasLayer(key)) await storeEntriesLayer(store, key, trees, entries, false);
  return [...layers, store.storedLayer(`sha256:${key}`)];
}

/** Whether a passwd or group table has an entry of the user's name or id. */
function namesTheUser(table: Buffer): boolean {
  return tableOf(table).some((fields) => fields[0] === SANDBOX_USER.name || fields[2] === String(SANDBOX_USER.id));
}

/** The image's file (its name, owner and mode kept) with `line` added at its end. */
function appended(file: NonNullable<ReturnType<typeof imageFile>>, line: string): TarEntry {
  const ending = file.content.length === 0 || file.content.at(-1) === 0x0a ? '' : '\n';
  return {
    name: file.path.slice(1),
    content: Buffer.concat([file.content, Buffer.from(`${ending}${line}\n`)]),
    mode: file.stat.mode & 0o7777,
    uid: file.stat.uid,
    gid: file.stat.gid,
  };
}
