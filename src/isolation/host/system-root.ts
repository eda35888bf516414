import { chmodSync, cpSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { HostLayout } from './host-layout.js';
import { ownedName } from './owned-dirs.js';

/** The directories of a root beyond the system's, empty, with the modes a Debian root gives them. */
const ROOT_DIRECTORIES: ReadonlyArray<readonly [string, number]> = [
  ['etc', 0o755],
  ['home', 0o755],
  ['root', 0o700],
  ['tmp', 0o1777],
  ['var', 0o755],
  ['var/tmp', 0o1777],
  ['opt', 0o755],
  ['srv', 0o755],
  ['mnt', 0o755],
  ['run', 0o755],
  ['proc', 0o555],
  ['dev', 0o755],
];

/** Debian's chromium wrapper sources every file here for its flags. */
const CHROMIUM_SETTINGS = '/etc/chromium.d';

/**
 * Chromium's own sandbox needs user namespaces (or its setuid helper), which a process in a
 * sandbox here may not make (nor gain by setuid): without this it does not start at all (a
 * desktop's browser, `xdg-open`). Its processes are held by the sandbox around them instead.
 */
const CHROMIUM_IN_A_SANDBOX = `# agent-runner: chromium runs inside a sandbox that holds it (user namespaces are not for its own).
export CHROMIUM_FLAGS="$CHROMIUM_FLAGS --no-sandbox --test-type --no-first-run"
`;

/**
 * The lowest layer of a writable root of the host's system (SandboxTemplate.writableRoot): what
 * bwrap builds read-only from the layout otherwise, as one directory. The system's directories
 * are empty here, each overlaid with the host's own by image-root.c (--system); its links (bin ->
 * usr/bin) and copies of the chosen /etc (small: no secret is among them) are in it, with the
 * empty directories a root has. Written once per process under `runtimeDir`/system-roots, in a
 * directory named after it, so the next process reaps it once this one is gone; owned by the
 * host's root, whose files the sandbox's root owns through the layer's idmap.
 */
export function writeSystemRoot(runtimeDir: string, layout: HostLayout): string {
  const root = join(runtimeDir, 'system-roots', ownedName());
  mkdirSync(root, { recursive: true, mode: 0o755 });
  for (const [dir, mode] of ROOT_DIRECTORIES) makeDir(join(root, dir), mode);
  for (const dir of layout.directories) makeDir(join(root, dir), 0o755);
  for (const { path, target } of [...layout.symlinks, ...layout.ownLinks]) symlinkSync(target, join(root, path));
  for (const path of layout.etc) cpSync(path, join(root, path), { recursive: true, verbatimSymlinks: true, preserveTimestamps: true });
  if (layout.etc.includes(CHROMIUM_SETTINGS)) writeFileSync(join(root, CHROMIUM_SETTINGS, 'agent-runner-sandbox'), CHROMIUM_IN_A_SANDBOX);
  return root;
}

function makeDir(path: string, mode: number): void {
  mkdirSync(path, { recursive: true });
  // mkdir's mode passes through the umask: the sticky and world bits are set after.
  chmodSync(path, mode);
}
