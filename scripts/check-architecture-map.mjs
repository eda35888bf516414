#!/usr/bin/env node
// Fails (exit 1, each problem on a line of its own) when docs/architecture.md no longer matches
// src/ (scripts/architecture-map.mjs says how): run by `npm run lint`.
//   node scripts/check-architecture-map.mjs [MAP]   (MAP: docs/architecture.md)
import { readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { mapProblems, ROOT } from './architecture-map.mjs';

const map = process.argv[2] ?? join(ROOT, 'docs', 'architecture.md');
const problems = mapProblems(readFileSync(map, 'utf8'));
for (const problem of problems) console.error(`${relative(process.cwd(), map)}:${problem}`);
if (problems.length > 0) {
  console.error(`docs/architecture.md does not match the code (${problems.length}): fix the map or the code`);
  process.exit(1);
}
