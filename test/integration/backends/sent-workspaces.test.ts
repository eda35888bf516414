import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { runJob } from '../../../src/runner/run-job.js';
import { makeTarGz } from '../../helpers/archives.js';
import { availableKinds } from '../../helpers/backends.js';
import { testRuntime } from '../../helpers/runtime.js';
import { makeWorkspace } from '../../helpers/workspace.js';

/**
 * A workspace sent in the request is written out on the host and imported as a local_path
 * one is, so it runs on every backend (a microVM's files included) with the same hash.
 */
const runtime = testRuntime();
after(() => runtime.dispose());

const files = { 'main.py': 'import os\nprint(sorted(os.listdir(".")), open("data/in.txt").read())\n', 'data/in.txt': 'hello', '.env': 'SECRET=1' };
const command = { argv: ['python3', 'main.py'] };
const expected = "['data', 'main.py'] hello\n";

const hostHash = (await runJob({ workspace: { source: 'local_path', path: makeWorkspace(files) }, command }, { runtime })).replay.workspace_sha256;
const workspaces = {
  inline: { source: 'inline', files: Object.entries(files).map(([path, content]) => ({ path, content })) },
  archive: { source: 'archive', format: 'tar.gz', data: (await makeTarGz(Object.entries(files).map(([name, content]) => ({ name, content })))).toString('base64') },
};

for (const kind of await availableKinds(runtime, 'run-job')) {
  describe(`sent workspaces on ${kind}`, () => {
    for (const [source, workspace] of Object.entries(workspaces)) {
      it(`runs an ${source} workspace, hashed as the same local_path`, async () => {
        const result = await runJob({ workspace, command, backend: { kind } }, { runtime });
        assert.equal(result.status, 'completed', JSON.stringify(result.error ?? result.stderr));
        assert.equal(result.stdout.text, expected);
        assert.equal(result.replay.workspace_sha256, hostHash);
      });
    }
  });
}
