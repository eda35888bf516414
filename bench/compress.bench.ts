// Output compression benchmark.
//   node --import tsx bench/compress.bench.ts [--mib N]
// 1. Every corpus sample (real tool output, test/fixtures/compress/) through route mode:
//    bytes before/after and the reduction, per sample and per detected kind.
// 2. Throughput on a large synthetic log, as MiB/s and as a ratio to one plain
//    String.split('\n') pass over the same text, at two sizes to show the cost stays linear.
import { performance } from 'node:perf_hooks';
import { compressOutput, type CompressionMode } from '../src/compress/index.js';
import { loadCorpus } from '../test/helpers/compress-corpus.js';

const MIB = 1024 * 1024;
const largeMib = Number(process.argv[process.argv.indexOf('--mib') + 1] ?? '') || 50;

function table(headers: string[], rows: (string | number)[][]): string {
  const cells = [headers, ...rows.map((r) => r.map(String))];
  const widths = headers.map((_, c) => Math.max(...cells.map((r) => r[c]!.length)));
  // Numbers right-aligned, words left-aligned.
  const line = (r: string[]) =>
    r
      .map((v, c) => (/^[\d.]+%?$/.test(v) ? v.padStart(widths[c]!) : v.padEnd(widths[c]!)))
      .join('  ')
      .trimEnd();
  return [line(cells[0]!), widths.map((w) => '-'.repeat(w)).join('  '), ...cells.slice(1).map(line)].join('\n');
}

const percent = (before: number, after: number): string => `${(before === 0 ? 0 : (1 - after / before) * 100).toFixed(1)}%`;

function corpusTable(): void {
  const perKind = new Map<string, { samples: number; before: number; after: number }>();
  const rows: (string | number)[][] = [];
  for (const s of loadCorpus()) {
    const r = compressOutput({ mode: 'route', argv: s.argv, stdout: s.stdout, stderr: s.stderr });
    const before = r.stdout_original_bytes + r.stderr_original_bytes;
    const after = r.stdout_compressed_bytes + r.stderr_compressed_bytes;
    rows.push([s.name, r.detected_kind, before, after, percent(before, after), r.applied ? r.strategy.join(' ') : 'unchanged (expansion-guard)']);
    const k = perKind.get(r.detected_kind) ?? { samples: 0, before: 0, after: 0 };
    perKind.set(r.detected_kind, { samples: k.samples + 1, before: k.before + before, after: k.after + after });
  }
  console.log('## Corpus, route mode, per sample\n');
  console.log(table(['sample', 'kind', 'bytes before', 'after', 'reduction', 'strategy'], rows));
  console.log('\n## Corpus, route mode, per kind\n');
  const kindRows = [...perKind].sort(([a], [b]) => a.localeCompare(b)).map(([kind, k]) => [kind, k.samples, k.before, k.after, percent(k.before, k.after)]);
  const total = [...perKind.values()].reduce((a, k) => ({ before: a.before + k.before, after: a.after + k.after }), { before: 0, after: 0 });
  kindRows.push(['all', rows.length, total.before, total.after, percent(total.before, total.after)]);
  console.log(table(['kind', 'samples', 'bytes before', 'after', 'reduction'], kindRows));
}

/** A service log: request lines varying by time, id and latency, periodic warnings and errors. */
function syntheticLog(targetBytes: number): string {
  const parts: string[] = [];
  let size = 0;
  for (let i = 0; size < targetBytes; i++) {
    const ts = new Date(Date.UTC(2024, 4, 1) + i * 37).toISOString();
    const id = ((i * 2654435761) >>> 0).toString(16).padStart(8, '0');
    let line: string;
    if (i % 5000 === 4999) line = `${ts} ERROR worker-${i % 8} job ${id} failed: connection reset by peer (attempt ${i % 3})`;
    else if (i % 700 === 699) line = `${ts} WARN  pool exhausted, queue depth ${i % 97}`;
    else if (i % 11 === 0) line = `${ts} DEBUG cache ${i % 2 ? 'hit' : 'miss'} key=user:${i % 1000}`;
    else line = `${ts} INFO  GET /api/items/${i % 5000} 200 ${i % 90}ms req=${id}`;
    parts.push(line);
    size += line.length + 1;
  }
  return `${parts.join('\n')}\n`;
}

function median(xs: number[]): number {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

function timeIt(runs: number, f: () => unknown): number {
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const start = performance.now();
    f();
    times.push(performance.now() - start);
  }
  return median(times);
}

function throughput(): void {
  const modes: CompressionMode[] = ['route', 'logs', 'errors', 'summary'];
  const rows: (string | number)[][] = [];
  const perMibMs = new Map<CompressionMode, number[]>();
  for (const mib of [Math.max(1, Math.round(largeMib / 10)), largeMib]) {
    const log = syntheticLog(mib * MIB);
    const runs = mib >= 20 ? 3 : 5;
    const splitMs = timeIt(runs, () => log.split('\n').length);
    for (const mode of modes) {
      const ms = timeIt(runs, () => compressOutput({ mode, argv: ['./server'], stdout: log, stderr: '' }));
      const r = compressOutput({ mode, argv: ['./server'], stdout: log, stderr: '' });
      rows.push([
        `${mib} MiB`,
        mode,
        r.detected_kind,
        (mib / (ms / 1000)).toFixed(1),
        (mib / (splitMs / 1000)).toFixed(1),
        (ms / splitMs).toFixed(1),
        percent(r.stdout_original_bytes, r.stdout_compressed_bytes),
      ]);
      perMibMs.set(mode, [...(perMibMs.get(mode) ?? []), ms / mib]);
    }
  }
  console.log(`\n## Throughput on a synthetic service log (median of 3-5 runs)\n`);
  console.log(table(['input', 'mode', 'kind', 'MiB/s', "split('\\n') MiB/s", 'time ÷ split time', 'reduction'], rows));
  console.log('\n## Linearity: time per MiB at the large size ÷ time per MiB at the small size (1.0 = linear)\n');
  console.log(
    table(
      ['mode', 'ratio'],
      modes.map((m) => {
        const [small, large] = perMibMs.get(m)!;
        return [m, (large! / small!).toFixed(2)];
      }),
    ),
  );
}

corpusTable();
throughput();
