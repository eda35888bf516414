import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { loadConfig } from '../../../src/config/load.js';
import type { RunJobResult } from '../../../src/contract/run-job.js';
import { StateRuns } from '../../../src/runner/state-runs.js';
import { deferPass, expired, passDue } from '../../../src/util/retention.js';

const DAY = 86_400_000;
const NOW = Date.parse('2026-06-01T00:00:00Z');

describe('retention', () => {
  const entries = [
    { id: 'live-old', bornAt: NOW - 90 * DAY, endedAt: null },
    { id: 'a', bornAt: NOW - 40 * DAY, endedAt: NOW - 40 * DAY },
    { id: 'b', bornAt: NOW - 3 * DAY, endedAt: NOW - 2 * DAY },
    { id: 'c', bornAt: NOW - 2 * DAY, endedAt: NOW - 1 * DAY },
    { id: 'd', bornAt: NOW - DAY, endedAt: NOW },
  ];
  const chosen = (maxAgeMs: number | null, maxCount: number | null) => expired(entries, { maxAgeMs, maxCount }, NOW).map(({ entry, reason }) => `${entry.id}:${reason}`);

  it('lets ended entries past the age go, never one still going however old', () => {
    assert.deepEqual(chosen(30 * DAY, null), ['a:age']);
    assert.deepEqual(chosen(null, null), []);
  });

  it('beyond the count, the oldest ended go first; live ones count but stay', () => {
    assert.deepEqual(chosen(null, 3), ['a:count', 'b:count']);
    assert.deepEqual(chosen(30 * DAY, 4), ['a:age']);
    assert.deepEqual(chosen(null, 1), ['a:count', 'b:count', 'c:count', 'd:count']);
  });

  it('an automatic pass is due once the stamp says so, and deferring it moves that ahead', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'retention-stamp-'));
    after(() => rmSync(dir, { recursive: true, force: true }));
    const stamp = join(dir, '.retention');
    assert.equal(await passDue(stamp), true, 'no stamp: never swept');
    await deferPass(stamp, 60_000);
    assert.equal(await passDue(stamp), false);
    assert.equal(await passDue(stamp, Date.now() + 61_000), true);
  });
});

describe('runs kept under the state dir', () => {
  const stateDir = mkdtempSync(join(tmpdir(), 'retention-state-'));
  after(() => rmSync(stateDir, { recursive: true, force: true }));
  const runsDir = join(stateDir, 'runs');
  const config = loadConfig({}, { stateDir, retention: { maxAgeDays: 30, maxCount: 4 } });

  /** A run dir as runJob leaves it, its last change (or its result's) `age` ago. */
  function run(id: string, options: { ended: boolean; ageMs: number }): void {
    const dir = join(runsDir, id);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'stdout.log'), '');
    const when = new Date(Date.now() - options.ageMs);
    if (options.ended) {
      writeFileSync(join(dir, 'result.json'), '{}');
      utimesSync(join(dir, 'result.json'), when, when);
    }
    utimesSync(dir, when, when);
  }

  it('a new run first lets go what the policy says: old and surplus ended runs and abandoned ones, never a live one', async () => {
    run('job_old', { ended: true, ageMs: 40 * DAY });
    run('job_abandoned', { ended: false, ageMs: 3 * DAY });
    run('job_earlier', { ended: true, ageMs: 2 * DAY });
    run('job_recent', { ended: true, ageMs: DAY });
    run('job_live', { ended: false, ageMs: 60_000 });
    const runs = new StateRuns(config);
    const dir = await runs.open('job_new');
    assert.equal(dir, join(runsDir, 'job_new'));
    assert.equal(statSync(dir).mode & 0o777, 0o700);
    // Six runs for four places: job_old goes by age, job_abandoned (no result, untouched for
    // longer than any run lasts) as the oldest ended one left.
    assert.deepEqual(readdirSync(runsDir).sort(), ['.retention', 'job_earlier', 'job_live', 'job_new', 'job_recent']);

    await runs.keep({ job_id: 'job_new' } as RunJobResult);
    assert.ok(statSync(join(dir, 'result.json')).isFile());
    run('job_late', { ended: true, ageMs: 50 * DAY });
    await runs.open('job_next');
    assert.ok(readdirSync(runsDir).includes('job_late'), 'the next pass waits for its interval');
  });
});
