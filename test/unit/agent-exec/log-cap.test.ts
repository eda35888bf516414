import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { launcherArgv, DEFAULT_LIMITS } from '../../../src/agent-exec/limits.js';
import { byteSize } from '../../../src/agent-exec/options.js';
import { logExtent, readExcerpt } from '../../../src/agent-exec/log-ranges.js';
import { CappedLog } from '../../../src/agent-exec/log-writer.js';
import { removeDir, tempDir } from '../../helpers/agent-exec.js';

const KEY = 'feedface';
const CAP = 64 * 1024;

/** A stream whose every byte says where it is: line N is "N\n" padded, so any slice can be checked. */
function stream(bytes: number): Buffer {
  const lines: string[] = [];
  let length = 0;
  for (let n = 0; length < bytes; n++) {
    const line = `${String(n).padStart(9, '0')}\n`;
    lines.push(line);
    length += line.length;
  }
  return Buffer.from(lines.join('')).subarray(0, bytes);
}

async function writeInChunks(log: CappedLog, data: Buffer, chunk: number): Promise<void> {
  for (let at = 0; at < data.length; at += chunk) await log.write(data.subarray(at, at + chunk));
  await log.close();
}

describe('capped logs', () => {
  const dir = tempDir('agent-exec-logcap-');
  after(() => removeDir(dir));

  it('below the cap the file is the output, byte for byte', async () => {
    const path = join(dir, 'small.log');
    const data = stream(CAP);
    await writeInChunks(await CappedLog.open(path, CAP, KEY), data, 4096);
    assert.deepEqual(readFileSync(path), data);
    assert.deepEqual(await logExtent(path, KEY), { start: 0, total: CAP });
  });

  for (const chunk of [1000, 4096, 3 * CAP]) {
    it(`past the cap: a mark, then the newest output; ranges are offsets of the whole stream (chunks of ${chunk})`, async () => {
      const path = join(dir, `big-${chunk}.log`);
      const data = stream(10 * CAP + 123);
      await writeInChunks(await CappedLog.open(path, CAP, KEY), data, chunk);
      const file = readFileSync(path);
      assert.ok(file.length <= CAP, `the log holds ${file.length} bytes`);
      const markEnd = file.indexOf(0x0a) + 1;
      const resumes = Number(/the first (\d+) bytes of output were dropped at the cap of 65536 bytes/.exec(file.subarray(0, markEnd).toString())![1]);
      assert.ok(file.subarray(0, markEnd).toString().startsWith(`[agent-exec log ${KEY}] `));
      assert.deepEqual(file.subarray(markEnd), data.subarray(resumes), 'the newest output, whole');
      const { start, total } = await logExtent(path, KEY);
      assert.equal(total, data.length);
      assert.equal(start, resumes - markEnd);

      const tail = await readExcerpt(path, { offset: null, maxBytes: 100, settled: true, key: KEY });
      assert.deepEqual(tail.range, [data.length - 100, data.length]);
      assert.deepEqual(tail.bytes, data.subarray(-100));
      const page = await readExcerpt(path, { offset: resumes + 7, maxBytes: 50, settled: true, key: KEY });
      assert.deepEqual(page.bytes, data.subarray(resumes + 7, resumes + 57), 'an offset means the same bytes as in the whole stream');
      const before = await readExcerpt(path, { offset: 0, maxBytes: markEnd + 10, settled: true, key: KEY });
      assert.deepEqual(before.range, [start, start + markEnd + 10], 'a dropped offset starts at the first one kept');
      assert.deepEqual(before.bytes, file.subarray(0, markEnd + 10));
      assert.equal(before.start, start);
    });
  }

  it("a mark the job prints itself, without the job's key, moves nothing", async () => {
    const path = join(dir, 'forged.log');
    const forged = Buffer.from('[agent-exec log 00000000] the first 999999 bytes of output were dropped at the cap of 65536 bytes; the newest follow.\nhello\n');
    await writeInChunks(await CappedLog.open(path, CAP, KEY), forged, 4096);
    assert.deepEqual(await logExtent(path, KEY), { start: 0, total: forged.length });
    assert.deepEqual((await readExcerpt(path, { offset: 0, maxBytes: 10, settled: true, key: KEY })).range, [0, 10]);
  });
});

describe('limits on the command line', () => {
  it('sizes: bytes, or K/M/G/T in powers of 1024', () => {
    const size = byteSize(1);
    assert.equal(size('1048576'), 1048576);
    assert.equal(size('64k'), 65536);
    assert.equal(size('512M'), 512 * 1024 * 1024);
    assert.equal(size('4GiB'), 4 * 1024 ** 3);
    assert.equal(size('1.5G'), 1.5 * 1024 ** 3);
    assert.throws(() => size('lots'), /expected a size/);
    assert.throws(() => byteSize(65536)('1k'), /at least 65536/);
  });

  it('the launcher chain: join the cgroup, then prlimit, then the command; rlimits only without a cgroup', () => {
    const cgroup = { procsFiles: () => ['/sys/fs/cgroup/pids/x/cgroup.procs'] };
    const tools = { sh: '/bin/sh', prlimit: '/usr/bin/prlimit' };
    const chain = launcherArgv(['bwrap', '--', 'true'], DEFAULT_LIMITS, cgroup, tools);
    assert.deepEqual(chain.slice(0, 2), ['/bin/sh', '-c']);
    assert.deepEqual(chain.slice(3), ['sh', '/sys/fs/cgroup/pids/x/cgroup.procs', '--', '/usr/bin/prlimit', '--nproc=1024', '--core=0', '--', 'bwrap', '--', 'true']);
    assert.deepEqual(launcherArgv(['true'], DEFAULT_LIMITS, null, tools), ['/usr/bin/prlimit', '--nproc=1024', '--core=0', `--data=${4 * 1024 ** 3}`, '--', 'true']);
    assert.deepEqual(launcherArgv(['true'], DEFAULT_LIMITS, null, { ...tools, prlimit: null }), ['true']);
  });
});
