// Writes a sample's expect.json from its captured output.
// The strings that must survive compression are pulled out of the real stdout/stderr
// (by regex, or checked literally), so the fixtures never contain text nobody ran, except the
// samples of tools that cannot run here, which say so (--hand-made).
//
// usage: node expect.mjs DIR MODE KIND EXIT_CODE [--grep REGEX]... [--literal TEXT]... [--hand-made WHY]
//   --grep    every output line matching REGEX is kept (its first capture group if it has one,
//             otherwise the trimmed line); a pattern that matches nothing is an error, because
//             a capture that lost its failures would otherwise pass silently.
//   --literal TEXT must occur somewhere in the output; it is kept as given.
//   --hand-made WHY marks a sample whose output was written by hand, not captured, because the
//             tool cannot run here; WHY says so and is stored as expect.json's "hand_made".
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const [dir, mode, kind, exitCode, ...rest] = process.argv.slice(2);
if (!dir || !mode || !kind || exitCode === undefined) {
  console.error('usage: expect.mjs DIR MODE KIND EXIT_CODE [--grep REGEX]... [--literal TEXT]...');
  process.exit(2);
}

const stdout = readFileSync(join(dir, 'stdout.txt'), 'utf8');
const stderr = readFileSync(join(dir, 'stderr.txt'), 'utf8');
const lines = `${stdout}\n${stderr}`.split('\n');
const mustKeep = new Set();
let handMade;

for (let i = 0; i < rest.length; i += 2) {
  const flag = rest[i];
  const value = rest[i + 1];
  if (value === undefined) throw new Error(`${flag} needs a value`);
  if (flag === '--grep') {
    const re = new RegExp(value);
    let hits = 0;
    for (const line of lines) {
      const m = re.exec(line);
      if (!m) continue;
      const kept = (m[1] ?? line).trim();
      if (kept) {
        mustKeep.add(kept);
        hits++;
      }
    }
    if (hits === 0) throw new Error(`${dir}: --grep ${value} matched nothing`);
  } else if (flag === '--literal') {
    if (!stdout.includes(value) && !stderr.includes(value)) {
      throw new Error(`${dir}: --literal ${JSON.stringify(value)} is not in the output`);
    }
    mustKeep.add(value);
  } else if (flag === '--hand-made') {
    handMade = value;
  } else {
    throw new Error(`unknown flag ${flag}`);
  }
}

writeFileSync(
  join(dir, 'expect.json'),
  `${JSON.stringify({ mode, kind, exit_code: Number(exitCode), must_keep: [...mustKeep], ...(handMade === undefined ? {} : { hand_made: handMade }) }, null, 2)}\n`,
);
