import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';

/**
 * Node.js cannot open AF_VSOCK sockets, so a vsock listener is bridged by socat to the
 * guest runner's own unix socket: every vsock connection becomes one unix connection.
 */
export function startVsockBridge(port: number, unixPath: string, socatPath = '/usr/bin/socat'): ChildProcess {
  if (!existsSync('/dev/vsock')) throw new Error('vsock is unavailable: /dev/vsock does not exist (not inside a VM with a vsock device)');
  if (!existsSync(socatPath)) throw new Error(`vsock needs socat to bridge AF_VSOCK: ${socatPath} is missing (apt-get install socat)`);
  return spawn(socatPath, [`VSOCK-LISTEN:${port},reuseaddr,fork`, `UNIX-CONNECT:${unixPath}`], { stdio: ['ignore', 'ignore', 'inherit'] });
}
