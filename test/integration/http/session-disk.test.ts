import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { api, startServer } from '../../helpers/server.js';

const MiB = 1024 * 1024;
const notRoot = process.getuid?.() !== 0 && 'a size-limited work dir needs root';

// Files of 8 MiB: one file is bounded by RLIMIT_FSIZE (the session's largest file) on its own.
const FILL = `import os
os.mkdir("fill")
written = 0
try:
    for n in range(100000):
        with open(f"fill/{n}", "wb", buffering=0) as f:
            for _ in range(8):
                written += f.write(b"0" * (1 << 20))
except OSError as error:
    print("errno", error.errno, "after", written // (1 << 20), "MiB")
`;

describe('a session whose work dir is full', { skip: notRoot }, () => {
  // The work dir is larger than the session's memory: filling it must answer ENOSPC, not
  // spend the memory and end the session in an OOM kill.
  it('answers ENOSPC in the cell, and the session lives on', async () => {
    const server = await startServer([], { env: { AGENT_RUNNER_SESSIONS__WORK_DIR_BYTES: String(256 * MiB) } });
    try {
      const session = await api(server.url, 'POST', '/v1/sessions', { lang: 'python', limits: { memory_bytes: 128 * MiB } });
      assert.equal(session.status, 201, session.text);
      const filled = await api(server.url, 'POST', `/v1/sessions/${session.json.id}/exec`, { code: FILL, timeout: 120 });
      assert.equal(filled.status, 200, filled.text);
      const answer = /^errno 28 after (\d+) MiB\n$/.exec(filled.json.stdout);
      assert.ok(answer, filled.text);
      assert.ok(Number(answer[1]) > 128, `the work dir held more than the session's memory (${answer[1]} MiB)`);
      assert.equal(filled.json.session_ended, false, filled.text);

      const next = await api(server.url, 'POST', `/v1/sessions/${session.json.id}/exec`, { code: 'import shutil\nshutil.rmtree("fill")\nprint(written > 0)' });
      assert.equal(next.json.stdout, 'True\n', next.text);
      assert.equal((await api(server.url, 'GET', `/v1/sessions/${session.json.id}`)).json.state, 'running');
    } finally {
      await server.stop();
    }
  });
});
