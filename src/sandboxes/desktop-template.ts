import { accessSync, constants } from 'node:fs';
import { SandboxUnavailableError, type SandboxBackend } from '../isolation/types.js';

/** The template `@e2b/desktop` creates by default: a virtual display, XFCE, a browser and a VNC server its stream serves. */
export const DESKTOP_TEMPLATE = 'desktop';

/**
 * What the desktop's SDK runs in the sandbox, from the host's system (scripts/setup-host.sh
 * installs them): the display and its session, input and screenshots, the stream (x11vnc, and
 * noVNC at /opt/noVNC, host-layout.ts), and what it checks them with.
 */
const DESKTOP_FILES = [
  '/usr/bin/Xvfb',
  '/usr/bin/xdpyinfo',
  '/usr/bin/startxfce4',
  '/usr/bin/dbus-launch',
  '/usr/bin/xdotool',
  '/usr/bin/scrot',
  '/usr/bin/xrandr',
  '/usr/bin/x11vnc',
  '/usr/share/novnc/utils/novnc_proxy',
  '/usr/bin/websockify',
  '/usr/bin/netstat',
  '/usr/bin/chromium',
];

let missing: string[] | undefined;

/**
 * Refuses a desktop where it cannot be one, said at once rather than as the SDK's "Could not
 * start XFCE" a minute later: its programs missing from the host; on gVisor (runsc 2024-07),
 * where GLib cannot start a program (its spawn's close_range(CLOSE_RANGE_CLOEXEC) is refused with
 * EINVAL, "Failed to close file descriptor for child process"), so XFCE's session starts none of
 * its parts; on the microVM, whose guest image holds no desktop and whose emulated CPU could not
 * draw one at a usable pace.
 */
export function checkDesktop(backend: SandboxBackend): void {
  missing ??= DESKTOP_FILES.filter((path) => {
    try {
      accessSync(path, constants.X_OK);
      return false;
    } catch {
      return true;
    }
  });
  if (missing.length > 0) throw new SandboxUnavailableError(`the desktop template needs ${missing.join(', ')} on this host: run scripts/setup-host.sh`);
  if (backend.kind !== 'local_process') {
    throw new SandboxUnavailableError(`the desktop template runs on local_process, not on ${backend.kind}: its XFCE session does not start there (see docs/desktop.md)`);
  }
}
