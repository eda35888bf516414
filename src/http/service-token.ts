import { randomBytes } from 'node:crypto';
import { closeSync, constants, fchmodSync, fstatSync, fsyncSync, linkSync, mkdirSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';

/** The file under the state dir that holds the token `serve` generated, when none was given. */
export const SERVICE_TOKEN_FILE = 'service-token';

export interface ServiceToken {
  token: string;
  file: string;
  /** Made by this call (first start): the caller prints it once; later starts reuse it silently. */
  generated: boolean;
}

/**
 * The token of a service started without one, as Jupyter does: generated on first start into
 * `<stateDir>/service-token` (mode 0600, written whole before it appears under its name) and
 * read back on every later start. A file that is not a regular file of ours, or that others may
 * read, is refused rather than trusted or silently fixed: whoever could read it had the token.
 */
export function loadOrCreateServiceToken(stateDir: string): ServiceToken {
  mkdirSync(stateDir, { recursive: true, mode: 0o755 });
  const file = join(stateDir, SERVICE_TOKEN_FILE);
  const existing = readTokenFile(file);
  if (existing !== null) return { token: existing, file, generated: false };
  const token = randomBytes(32).toString('base64url');
  const temp = `${file}.${process.pid}.${randomBytes(6).toString('hex')}`;
  const fd = openSync(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
  try {
    fchmodSync(fd, 0o600); // whatever the umask
    writeSync(fd, `${token}\n`);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  try {
    // link, not rename: a service starting at the same moment keeps the token it wrote first.
    linkSync(temp, file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    const raced = readTokenFile(file);
    if (raced === null) throw error;
    return { token: raced, file, generated: false };
  } finally {
    unlinkSync(temp);
  }
  return { token, file, generated: true };
}

/** The token in `file`, null when there is no file; throws for a file that cannot be trusted. */
function readTokenFile(file: string): string | null {
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return null;
    if (code === 'ELOOP') throw new Error(`refusing the token file ${file}: it is a symbolic link`, { cause: error });
    throw error;
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) throw new Error(`refusing the token file ${file}: not a regular file`);
    if (stat.uid !== process.getuid?.()) throw new Error(`refusing the token file ${file}: owned by uid ${stat.uid}, not by this process`);
    if ((stat.mode & 0o077) !== 0) {
      throw new Error(`refusing the token file ${file}: mode ${(stat.mode & 0o777).toString(8)} lets others read it; delete it (a new token is generated) or chmod 600 it`);
    }
    const token = readFileSync(fd, 'utf8').trim();
    if (token === '' || /\s/.test(token)) throw new Error(`refusing the token file ${file}: it must hold one token on one line; delete it and a new one is generated`);
    return token;
  } finally {
    closeSync(fd);
  }
}
