import { existsSync, lstatSync, readdirSync, readlinkSync } from 'node:fs';

/** Top-level system directories: on merged-/usr hosts they are symlinks into /usr. */
const SYSTEM_ROOTS = ['/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32'];

/**
 * The parts of /etc that programs need to start and behave (dynamic loader cache,
 * alternatives symlinks such as awk, time zone, TLS roots, Debian's matplotlib defaults, which
 * matplotlib refuses to import without, and fontconfig's configuration, without which its font
 * listing complains on every first figure), and the configuration Debian's JDKs and R keep in
 * /etc (their /usr/lib/jvm/java-N-openjdk/conf and /usr/lib/R/etc link there: without it a JVM
 * stops at "Error loading java.security file", R at its missing Renviron); nothing with secrets.
 */
const ETC_ENTRIES = [
  '/etc/alternatives',
  '/etc/ld.so.cache',
  '/etc/ld.so.conf',
  '/etc/ld.so.conf.d',
  '/etc/localtime',
  '/etc/nsswitch.conf',
  '/etc/ssl/certs',
  '/etc/ca-certificates',
  '/etc/matplotlibrc',
  '/etc/fonts',
  '/etc/R',
];

/**
 * What a desktop in a sandbox reads from /etc (the `desktop` template: Xvfb, XFCE, x11vnc,
 * chromium): X's and XFCE's defaults (its session, panel, window manager and menus), GTK's,
 * D-Bus's session policy and chromium's wrapper settings; the rest of /etc/xdg (pip's
 * configuration, which may name an index with its password) stays out. Nothing with secrets.
 */
const DESKTOP_ETC_ENTRIES = [
  '/etc/X11',
  '/etc/xdg/xfce4',
  '/etc/xdg/autostart',
  '/etc/xdg/menus',
  '/etc/xdg/Thunar',
  '/etc/xdg/user-dirs.conf',
  '/etc/xdg/user-dirs.defaults',
  '/etc/gtk-3.0',
  '/etc/dbus-1',
  '/etc/chromium.d',
];

/**
 * Where E2B's desktop image has noVNC, which `@e2b/desktop` starts by that path
 * (`/opt/noVNC/utils/novnc_proxy`): Debian's novnc, where the host has it.
 */
const NOVNC = { path: '/opt/noVNC', target: '/usr/share/novnc' };

/** Debian's JDK configurations: /etc/java-17-openjdk and the like, one per JDK installed. */
function jdkConfigurations(): string[] {
  try {
    return readdirSync('/etc')
      .filter((name) => /^java-\d+-openjdk$/.test(name))
      .map((name) => `/etc/${name}`);
  } catch {
    return [];
  }
}

export interface HostLayout {
  symlinks: ReadonlyArray<{ path: string; target: string }>;
  /** Links of a sandbox root's own directories, which the host's root has not (/opt/noVNC): never made where /opt is the host's. */
  ownLinks: ReadonlyArray<{ path: string; target: string }>;
  directories: readonly string[];
  etc: readonly string[];
}

export function readHostLayout(): HostLayout {
  const symlinks: Array<{ path: string; target: string }> = [];
  const directories: string[] = ['/usr'];
  for (const path of SYSTEM_ROOTS) {
    let stat;
    try {
      stat = lstatSync(path);
    } catch {
      continue;
    }
    if (stat.isSymbolicLink()) symlinks.push({ path, target: readlinkSync(path) });
    else if (stat.isDirectory()) directories.push(path);
  }
  return {
    symlinks,
    ownLinks: existsSync(NOVNC.target) ? [NOVNC] : [],
    directories,
    etc: [...ETC_ENTRIES, ...DESKTOP_ETC_ENTRIES, ...jdkConfigurations()].filter((path) => existsSync(path)),
  };
}
