import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { jobDirs, ok, UNTIL_IT_ENDS } from '../../helpers/agent-exec.js';

/**
 * Class 5 of the second security round: agent-exec jobs ran as host root with the whole host
 * mounted and no limits. Each case is the attack that worked, with the safe outcome asserted:
 * the job sees an allowlist of the host (no root-only file or socket outside it), and its
 * processes, tmpfs and logs are bounded.
 */
const asRoot = process.getuid?.() === 0;
const PYTHON = '/usr/bin/python3';
const MiB = 1024 * 1024;

describe('agent-exec: an allowlist view of the host', { skip: !asRoot && 'the job is host root only when agent-exec runs as root' }, () => {
  const { root, cwd } = jobDirs('agent-exec-view');
  /** 0700 directories holding a 0600 file, where a host keeps such things. */
  const secretDirs = ['/srv', '/var/tmp', '/root'].map((parent) => mkdtempSync(join(parent, '.agent-exec-secret-')));
  const secret = `secret-${process.pid}-${Date.now()}`;
  for (const dir of secretDirs) {
    chmodSync(dir, 0o700);
    writeFileSync(join(dir, 'key'), secret, { mode: 0o600 });
  }
  const socketDir = mkdtempSync(join(existsSync('/run') ? '/run' : '/var/tmp', 'agent-exec-sock-'));
  chmodSync(socketDir, 0o755);
  const socketPath = join(socketDir, 'docker.sock');
  const server: Server = createServer((socket) => socket.end('daemon answered\n'));
  before(() => new Promise<void>((resolve) => server.listen(socketPath, resolve)));
  after(() => {
    server.close();
    for (const dir of [...secretDirs, socketDir]) rmSync(dir, { recursive: true, force: true });
  });

  it('a 0600 file in a 0700 directory outside the view is unreadable, by its path or through a link in the cwd', async () => {
    symlinkSync(join(secretDirs[0]!, 'key'), join(cwd, 'link-to-key'));
    const reads = [...secretDirs.map((dir) => join(dir, 'key')), 'link-to-key'].map((path) => `cat ${path} 2>/dev/null || echo "no ${path}"`);
    const response = await ok(root, ['run', ...UNTIL_IT_ENDS, '--cwd', cwd, '--', 'sh', '-c', reads.join('; ')]);
    assert.equal(response.state, 'exited');
    assert.doesNotMatch(response.stdout, new RegExp(secret));
    assert.equal(response.stdout, [...secretDirs.map((dir) => `no ${join(dir, 'key')}`), 'no link-to-key', ''].join('\n'));
  });

  it('nothing of /srv, /var or /root is there at all; a named --read path is, read-only', async () => {
    const listing = await ok(root, ['run', ...UNTIL_IT_ENDS, '--cwd', cwd, '--', 'sh', '-c', 'ls -A /srv /var/tmp /root 2>&1']);
    const lines = listing.stdout.split('\n');
    assert.match(lines[0]!, /\/srv.*No such file or directory/);
    assert.match(lines[1]!, /\/var\/tmp.*No such file or directory/);
    // The home is an empty private tmpfs of the job's: nothing of the host's /root.
    assert.deepEqual(lines.slice(2), ['/root:', '']);
    const named = await ok(root, [
      'run',
      ...UNTIL_IT_ENDS,
      '--cwd',
      cwd,
      '--read',
      secretDirs[0]!,
      '--',
      'sh',
      '-c',
      `cat ${secretDirs[0]}/key; echo; touch ${secretDirs[0]}/new 2>/dev/null || echo read-only`,
    ]);
    assert.equal(named.stdout, `${secret}\nread-only\n`);
  });

  it('a unix socket outside the view (a docker.sock alike) is unreachable', async () => {
    const connect = `require('net').connect(${JSON.stringify(socketPath)}).on('data', (d) => process.stdout.write(d)).on('error', (e) => console.log(e.code))`;
    const response = await ok(root, ['run', ...UNTIL_IT_ENDS, '--cwd', cwd, '--', process.execPath, '-e', connect]);
    assert.equal(response.stdout, 'ENOENT\n');
    // The host's daemon does answer: it is the view that keeps the job from it.
    const host = await ok(root, ['run', ...UNTIL_IT_ENDS, '--cwd', cwd, '--sandbox', 'none', '--', process.execPath, '-e', connect]);
    assert.equal(host.stdout, 'daemon answered\n');
  });
});

describe('agent-exec: resource limits', () => {
  const { root, cwd } = jobDirs('agent-exec-limits');

  /** Forks up to `count` sleeping children, says how many it got and why it stopped, then reaps them. */
  const forker = (count: number) => [
    PYTHON,
    '-c',
    [
      'import os, time',
      'pids, failure = [], None',
      `for _ in range(${count}):`,
      '    try:',
      '        pid = os.fork()',
      '    except OSError as error:',
      '        failure = error.errno',
      '        break',
      '    if pid == 0:',
      '        time.sleep(120)',
      '        os._exit(0)',
      '    pids.append(pid)',
      'print(len(pids), failure, flush=True)',
      'for pid in pids: os.kill(pid, 9)',
      'for pid in pids: os.waitpid(pid, 0)',
    ].join('\n'),
  ];

  it('1,500 processes are stopped at the default limit (1024), and at --max-processes', { skip: !existsSync(PYTHON) && `${PYTHON} is not installed` }, async () => {
    for (const [flags, limit] of [
      [[], 1024],
      [['--max-processes', '64'], 64],
    ] as const) {
      const response = await ok(root, ['run', '--cwd', cwd, ...flags, '--until', '60', '--', ...forker(1500)]);
      assert.equal(response.state, 'exited', JSON.stringify(response));
      const [started, errno] = response.stdout.trim().split(' ');
      assert.ok(Number(started) < limit, `${started} processes started under a limit of ${limit}`);
      assert.ok(Number(started) > limit / 2, `only ${started} processes started under a limit of ${limit}`);
      assert.equal(errno, '11', 'fork failed with EAGAIN');
    }
  });

  it('filling /tmp, /dev/shm or the home stops at --tmp-size; the default is 1 GiB each; / and /dev take nothing', async () => {
    const fill = (path: string) => `head -c ${64 * MiB} /dev/zero > ${path} 2>/dev/null; stat -c %s ${path}`;
    const script = [fill('/tmp/fill'), fill('/dev/shm/fill'), fill('"$HOME/fill"'), 'touch /fill /dev/fill 2>/dev/null || echo read-only'].join('; ');
    const response = await ok(root, ['run', ...UNTIL_IT_ENDS, '--cwd', cwd, '--tmp-size', '16M', '--env', 'HOME=/home/agent', '--', 'sh', '-c', script]);
    assert.deepEqual(response.stdout.split('\n'), [String(16 * MiB), String(16 * MiB), String(16 * MiB), 'read-only', '']);
    const sizes = await ok(root, [
      'run',
      ...UNTIL_IT_ENDS,
      '--cwd',
      cwd,
      '--env',
      'HOME=/home/agent',
      '--',
      'sh',
      '-c',
      'for d in /tmp /dev/shm "$HOME"; do stat -f -c "%b %S" "$d"; done',
    ]);
    for (const line of sizes.stdout.trim().split('\n')) {
      const [blocks, blockSize] = line.split(' ').map(Number);
      assert.equal(blocks! * blockSize!, 1024 * MiB);
    }
  });

  it('memory past --memory is the kernel’s to kill, and the job says so', { skip: !existsSync(PYTHON) && `${PYTHON} is not installed` }, async () => {
    const hog = [PYTHON, '-c', 'blocks = []\nfor _ in range(64): blocks.append(bytearray(16 * 1024 * 1024))\nprint("allocated 1 GiB")'];
    const response = await ok(root, ['run', '--cwd', cwd, '--memory', '128M', '--until', '60', '--', ...hog]);
    const status = await ok(root, ['status', response.job_id]);
    assert.notEqual(response.stdout, 'allocated 1 GiB\n');
    // Killed by the kernel: bwrap reports its child's SIGKILL as 128 + 9.
    assert.ok(response.exit_signal === 'SIGKILL' || response.exit_code === 137, JSON.stringify(response));
    if ((status.limits as { enforced_by: string }).enforced_by !== 'rlimits') assert.match(response.error as unknown as string, /memory limit/);
  });

  it("the job's own cgroup holds the limits while it runs: processes, memory, CPU", async () => {
    const response = await ok(root, ['run', '--cwd', cwd, '--cpus', '0.5', '--memory', '256M', '--no-wait', '--', 'sleep', '30']);
    const status = await ok(root, ['status', response.job_id]);
    const limits = status.limits as Record<string, unknown>;
    assert.deepEqual(
      { ...limits, enforced_by: undefined },
      { max_processes: 1024, memory_bytes: 256 * MiB, cpus: 0.5, tmp_bytes: 1024 * MiB, max_log_bytes: 64 * MiB, enforced_by: undefined },
    );
    if (limits.enforced_by === 'rlimits') return;
    const groups = readFileSync(`/proc/${status.pid as number}/cgroup`, 'utf8');
    const path = (controller: string) => {
      const line = groups.split('\n').find((entry) => entry.split(':')[1]!.split(',').includes(controller) || (limits.enforced_by === 'cgroup-v2' && entry.startsWith('0::')));
      return join('/sys/fs/cgroup', limits.enforced_by === 'cgroup-v2' ? '' : controller, line!.split(':')[2]!);
    };
    const read = (controller: string, file: string) => readFileSync(join(path(controller), file), 'utf8').trim();
    if (limits.enforced_by === 'cgroup-v2') {
      assert.equal(read('pids', 'pids.max'), '1024');
      assert.equal(read('memory', 'memory.max'), String(256 * MiB));
      assert.equal(read('cpu', 'cpu.max'), '50000 100000');
    } else {
      assert.equal(read('pids', 'pids.max'), '1024');
      assert.equal(read('memory', 'memory.limit_in_bytes'), String(256 * MiB));
      assert.equal(read('cpu', 'cpu.cfs_quota_us'), '50000');
    }
    await ok(root, ['kill', response.job_id, '--signal', 'KILL']);
  });
});

describe('agent-exec: logs are capped, with a truncation mark and the tail kept', () => {
  const { root, cwd } = jobDirs('agent-exec-logcap');

  // A fixed volume, 8 MiB of `yes` (not `yes` for 3 s, whose volume is the machine's speed),
  // far past each cap asserted.
  it('8 MiB of `yes` leaves every log within --max-log-bytes; offsets stay those of the whole stream', async () => {
    const cap = MiB;
    const response = await ok(root, [
      'run',
      '--cwd',
      cwd,
      '--max-log-bytes',
      '1M',
      ...UNTIL_IT_ENDS,
      '--tail-lines',
      '1',
      '--',
      'sh',
      '-c',
      'yes | head -c 8M; echo tail-marker; echo err-tail >&2',
    ]);
    assert.equal(response.state, 'exited');
    const paths = [response.stdout_log_path, response.stderr_log_path, response.full_log_path] as string[];
    for (const path of paths) assert.ok(statSync(path).size <= cap, `${path} holds ${statSync(path).size} bytes`);

    // stdout went far past the cap: the log is the mark, then the newest output.
    const total = response.stdout_total_bytes;
    const first = response.stdout_first_offset as number;
    assert.ok(total > 4 * cap, `yes wrote only ${total} bytes`);
    assert.ok(first > 0);
    assert.equal(statSync(paths[0]!).size, total - first);
    const log = readFileSync(paths[0]!, 'utf8');
    assert.match(log, /^\[agent-exec log [0-9a-f]+\] the first (\d+) bytes of output were dropped at the cap of 1048576 bytes; the newest follow\.\n(y\n)+tail-marker\n$/);
    const resumes = Number(/the first (\d+) bytes/.exec(log)![1]);
    assert.equal(resumes, first + log.indexOf('\n') + 1, 'the output resumes right after the mark');
    // The snapshot and the excerpt agree with the log.
    assert.match(response.stdout, /y\ntail-marker\n$/);
    assert.deepEqual(response.stdout_range, [total - Buffer.byteLength(response.stdout), total]);
    assert.equal((response.snapshot as { stdout_tail: string; stdout_observed_bytes: number }).stdout_tail, 'tail-marker\n');
    assert.equal((response.snapshot as { stdout_observed_bytes: number }).stdout_observed_bytes, total);

    // Paging: the end, the start of what is kept (an older offset starts there), and status.
    const end = await ok(root, ['tail', response.job_id, '--max-bytes', '12']);
    assert.equal(end.stdout, 'tail-marker\n');
    assert.deepEqual(end.stdout_range, [total - 12, total]);
    const head = await ok(root, ['tail', response.job_id, '--offset-stdout', '0', '--max-bytes', '100']);
    assert.deepEqual(head.stdout_range, [first, first + 100]);
    assert.ok(head.stdout.startsWith('[agent-exec log '));
    const middle = await ok(root, ['tail', response.job_id, '--offset-stdout', String(resumes + 1), '--max-bytes', '6']);
    assert.equal(middle.stdout, log.slice(resumes + 1 - first, resumes + 7 - first));
    assert.match(middle.stdout, /^(y\n)+y?$|^(\ny)+\n?$/);
    const status = await ok(root, ['status', response.job_id]);
    assert.equal(status.stdout_total_bytes, total);
    assert.equal(status.stdout_first_offset, first);

    // stderr stayed small and whole; full.log was capped the same way and ends with both tails.
    assert.equal(readFileSync(paths[1]!, 'utf8'), 'err-tail\n');
    assert.equal(response.stderr_first_offset, 0);
    // (The two pipes are read as they come: stderr's line may land before stdout's backlog,
    // and be dropped with it.)
    const full = readFileSync(paths[2]!, 'utf8');
    assert.ok(/^\[agent-exec log [0-9a-f]+\] the first \d+ bytes of output were dropped/.test(full), full.slice(0, 200));
    assert.ok(full.endsWith(' stdout tail-marker\n') || full.endsWith(' stderr err-tail\n'), full.slice(-200));
  });

  it('the default cap is 64 MiB: 8 MiB of `yes`, as the attack ran it for 3 s', async () => {
    const response = await ok(root, ['run', '--cwd', cwd, ...UNTIL_IT_ENDS, '--', 'sh', '-c', 'yes | head -c 8M; echo tail-marker']);
    assert.equal(response.state, 'exited');
    const paths = [response.stdout_log_path, response.stderr_log_path, response.full_log_path] as string[];
    for (const path of paths) assert.ok(statSync(path).size <= 64 * MiB, `${path} holds ${statSync(path).size} bytes`);
    // full.log frames every 2-byte line with a 31-byte prefix: 4 Mi lines went past the cap for sure.
    const full = paths[2]!;
    assert.ok(readFileSync(full).subarray(0, 200).toString().startsWith('[agent-exec log '));
    assert.match(response.stdout, /y\ntail-marker\n$/);
    assert.equal(((await ok(root, ['status', response.job_id])).limits as { max_log_bytes: number }).max_log_bytes, 64 * MiB);
  });
});
