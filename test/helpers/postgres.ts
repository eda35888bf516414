import { execFileSync, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Debian keeps PostgreSQL's server programs off PATH, one directory per major version. */
function serverBinDir(): string {
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root) ? readdirSync(root).filter((name) => existsSync(join(root, name, 'bin', 'initdb'))) : [];
  const newest = versions.sort((a, b) => Number(b) - Number(a))[0];
  if (!newest) throw new Error('PostgreSQL is not installed: run scripts/setup-host.sh (it installs the postgresql package)');
  return join(root, newest, 'bin');
}

export interface ThrowawayPostgres {
  /** A connection string over the cluster's unix socket, to the `agent_runner` database. */
  url: string;
  dataDir: string;
  /** Stops the server (fast shutdown: connections are cut), keeping its data. */
  stop(): void;
  /** Starts it again on the same socket, after stop(). */
  start(): void;
  /** Stops it and deletes its data. */
  destroy(): void;
}

/**
 * A PostgreSQL cluster of its own for a test: `initdb` into a temp dir, run as the `postgres`
 * user (the server refuses root), listening only on a unix socket in that dir under a random
 * port number, with fsync off (the data is thrown away). Nothing else on the machine is touched.
 */
export function startPostgres(): ThrowawayPostgres {
  const bin = serverBinDir();
  const dir = mkdtempSync(join(tmpdir(), 'pg-'));
  const dataDir = join(dir, 'data');
  const postgres = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
  const group = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
  chownSync(dir, postgres, group);
  const port = 20_000 + Math.floor(Math.random() * 40_000);
  const asPostgres = (program: string, args: string[]) => {
    const ran = spawnSync('setpriv', [`--reuid=${postgres}`, `--regid=${group}`, '--init-groups', join(bin, program), ...args], { cwd: dir, encoding: 'utf8' });
    if (ran.status !== 0) throw new Error(`${program} failed (${ran.status}): ${ran.stderr}${ran.stdout}`);
  };
  asPostgres('initdb', ['-D', dataDir, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8']);
  const options = `-k ${dir} -p ${port} -c listen_addresses= -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200`;
  const start = () => asPostgres('pg_ctl', ['-D', dataDir, '-o', options, '-l', join(dir, 'server.log'), '-w', '-s', 'start']);
  const stop = () => asPostgres('pg_ctl', ['-D', dataDir, '-m', 'fast', '-w', '-s', 'stop']);
  start();
  asPostgres('createdb', ['-h', dir, '-p', String(port), '-U', 'postgres', 'agent_runner']);
  return {
    url: `postgresql://postgres@/agent_runner?host=${encodeURIComponent(dir)}&port=${port}`,
    dataDir,
    stop,
    start,
    destroy() {
      try {
        stop();
      } catch {
        // Already stopped.
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
