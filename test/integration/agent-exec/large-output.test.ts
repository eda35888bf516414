import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { checkResponse, ok, type Response, jobDirs } from '../../helpers/agent-exec.js';

const CLI = fileURLToPath(new URL('../../../dist/cli/agent-exec.js', import.meta.url));
const TIME = '/usr/bin/time';
const MiB = 1024 * 1024;
const TOTAL = 200 * MiB;
const LINE = `${'x'.repeat(1023)}\n`;
/** 200 MiB of 1 KiB lines, a marker, then a pause that keeps the supervisor alive to be measured. */
const BIG_JOB = ['sh', '-c', `yes "$(head -c 1023 /dev/zero | tr '\\0' x)" | head -c ${TOTAL}; echo tail-marker; sleep 1`];

interface Measured {
  response: Response;
  maxRssKb: number;
}

/** Runs the CLI under GNU time: the kernel's peak RSS of that process, not an estimate from inside. */
function measured(root: string, args: string[]): Promise<Measured> {
  return new Promise((resolve, reject) => {
    const child = spawn(TIME, ['-f', 'maxrss_kb=%M', process.execPath, CLI, ...args], { env: { ...process.env, AGENT_EXEC_ROOT: root }, stdio: ['ignore', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => err.push(chunk));
    child.on('error', reject);
    child.on('close', () => {
      const stderr = Buffer.concat(err).toString('utf8');
      const rss = /maxrss_kb=(\d+)/.exec(stderr);
      if (!rss) return reject(new Error(`no maxrss from ${TIME}: ${stderr}`));
      resolve({ response: checkResponse(args, Buffer.concat(out).toString('utf8'), stderr), maxRssKb: Number(rss[1]) });
    });
  });
}

/** The supervisor's peak RSS (VmHWM), sampled until it exits; the job's closing sleep leaves time to read it after the output. */
async function supervisorPeakKb(root: string, done: Promise<unknown>): Promise<number> {
  let finished = false;
  void done.then(() => (finished = true));
  let peak = 0;
  while (!finished) {
    for (const id of existsSync(join(root, 'jobs')) ? readdirSync(join(root, 'jobs')) : []) {
      try {
        const { supervisor_pid } = JSON.parse(readFileSync(join(root, 'jobs', id, 'state.json'), 'utf8')) as { supervisor_pid: number };
        const hwm = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${supervisor_pid}/status`, 'utf8'));
        if (hwm) peak = Math.max(peak, Number(hwm[1]));
      } catch {
        // Not written yet, or already gone.
      }
    }
    await sleep(100);
  }
  return peak;
}

describe('agent-exec with a job that prints 200 MiB', { skip: !existsSync(TIME) && `${TIME} is not installed` }, () => {
  const { root, cwd } = jobDirs('agent-exec-big');

  it('keeps the CLI and the supervisor flat, and tail pages through the log by range', async (t) => {
    // Every measured CLI call is one whose process tree is the CLI alone: a `run` that waited
    // would also count the supervisor it reaps in its children's peak.
    const small = await ok(root, ['run', '--cwd', cwd, '--until', '60', '--', 'echo', 'small']);
    const baseline = await measured(root, ['tail', small.job_id, '--compress', 'route']);
    // The logs keep all 200 MiB: the default cap (--max-log-bytes 64M) would keep the newest part only.
    const started = await measured(root, ['run', '--cwd', cwd, '--no-wait', '--max-log-bytes', '1G', '--', ...BIG_JOB]);
    const waiting = measured(root, ['wait', started.response.job_id, '--forever']);
    const supervisorKb = await supervisorPeakKb(root, waiting);
    const waited = await waiting;
    const excerpt = await measured(root, ['tail', started.response.job_id, '--compress', 'route']);
    t.diagnostic(
      `max RSS, kB: CLI tail of a 6-byte log (baseline) ${baseline.maxRssKb}; with the 200 MiB job: run --no-wait ${started.maxRssKb}, ` +
        `wait --forever ${waited.maxRssKb}, tail of the last 64 KiB compressed ${excerpt.maxRssKb}; the job's supervisor ${supervisorKb}`,
    );

    assert.equal(waited.response.state, 'exited');
    assert.equal(excerpt.response.stdout_total_bytes, TOTAL + 'tail-marker\n'.length);
    assert.match(excerpt.response.stdout, /x\ntail-marker\n$/);
    assert.equal(Buffer.byteLength(excerpt.response.stdout), 65_536);
    // The CLI reads 64 KiB (and compresses it): nothing like the 200 MiB behind it.
    for (const call of [started, waited, excerpt]) assert.ok(call.maxRssKb - baseline.maxRssKb < 32 * 1024, `a CLI call grew by ${call.maxRssKb - baseline.maxRssKb} kB`);
    assert.ok(supervisorKb > 0 && supervisorKb < 128 * 1024, `supervisor peaked at ${supervisorKb} kB`);

    const id = started.response.job_id;
    let offset = 0;
    for (let page = 0; page < 3; page++) {
      const tail = await ok(root, ['tail', id, '--offset-stdout', String(offset), '--max-bytes', String(MiB)]);
      assert.deepEqual(tail.stdout_range, [offset, offset + MiB]);
      assert.equal(tail.stdout, LINE.repeat(MiB / LINE.length));
      offset = tail.stdout_range[1];
    }
    const middle = await measured(root, ['tail', id, '--offset-stdout', String(100 * MiB + 1000), '--max-bytes', String(4 * MiB)]);
    assert.deepEqual(middle.response.stdout_range, [100 * MiB + 1000, 104 * MiB + 1000]);
    assert.equal(middle.response.stdout.slice(0, 100), LINE.repeat(2).slice(1000, 1100));
    assert.ok(middle.maxRssKb - baseline.maxRssKb < 48 * 1024, `tail of 4 MiB grew the CLI by ${middle.maxRssKb - baseline.maxRssKb} kB`);
    const last = await ok(root, ['tail', id, '--max-bytes', '12']);
    assert.equal(last.stdout, 'tail-marker\n');
    assert.deepEqual(last.stdout_range, [TOTAL, TOTAL + 12]);
  });
});
