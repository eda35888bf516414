import { stripVTControlCharacters } from 'node:util';
import type { RunJobResult } from '../contract/run-job.js';
import type { SandboxCodeResult, SandboxExecResult, SandboxRunCodeResult } from '../contract/sandbox.js';
import type { SessionExecResult } from '../contract/session.js';
import type { SnippetResponse } from '../contract/snippet.js';

/**
 * A run as text, for clients that read a tool's text content and not its structuredContent:
 * the outcome first, then the output an agent needs to act on. The structured result stays
 * the whole answer; this is a view of it.
 */
export function snippetText(response: SnippetResponse): string {
  return sections([`exit_code: ${response.exit_code}`, response.error ? `error: ${response.error}` : ''], {
    stdout: response.stdout,
    stderr: response.error && response.stderr === response.error ? '' : response.stderr,
  });
}

export function runJobText(result: RunJobResult): string {
  const outcome = `status: ${result.status}, exit_code: ${result.exit_code ?? 'none'}${result.signal ? `, signal: ${result.signal}` : ''}`;
  const error = result.error ? `error: ${result.error.code}: ${result.error.message}` : '';
  const artifacts = result.artifacts.length > 0 ? `artifacts: ${result.artifacts.map((artifact) => artifact.path).join(', ')}` : '';
  const stream = (captured: RunJobResult['stdout']) => (captured.truncated ? `${captured.text}\n[truncated: ${captured.observed_bytes} bytes in all]` : captured.text);
  return sections([outcome, error, artifacts], { stdout: stream(result.stdout), stderr: stream(result.stderr) });
}

export function sessionExecText(result: SessionExecResult): string {
  const ended = result.session_ended ? 'the session has ended' : '';
  // The value is said once, below; what else the cell showed is listed.
  const shown = resultLines(result.results.filter((each) => !each.is_main_result || Object.keys(each).some((key) => key !== 'is_main_result' && key !== 'text')));
  return sections([`exit_code: ${result.exit_code}`, result.error ? `error: ${result.error}` : '', ended, ...shown], {
    value: result.value ?? '',
    stdout: result.stdout,
    stderr: result.stderr,
  });
}

export function sandboxExecText(result: SandboxExecResult): string {
  return sections([`exit_code: ${result.exit_code}`, result.timed_out ? 'timed out: its process tree was killed' : ''], { stdout: result.stdout, stderr: result.stderr });
}

export function sandboxRunCodeText(result: SandboxRunCodeResult): string {
  const results = resultLines(result.results);
  const error = result.error ? `${result.error.name}: ${result.error.value}\n${stripVTControlCharacters(result.error.traceback)}` : '';
  return sections([result.timed_out ? 'timed out: the cell was interrupted; the context keeps its state' : '', ...results], {
    stdout: result.stdout,
    stderr: result.stderr,
    error,
  });
}

/** One line per result: what it is and the formats it came in. */
function resultLines(results: readonly SandboxCodeResult[]): string[] {
  return results.map((shown, index) => {
    const formats = Object.keys(shown).filter((key) => key !== 'is_main_result' && key !== 'text');
    const described = shown.chart ? ` (a ${(shown.chart as { type?: string }).type ?? 'chart'} chart)` : '';
    return `result ${index + 1}${shown.is_main_result ? ' (the value)' : ''}${described}: ${shown.text ?? ''}${formats.length > 0 ? ` [${formats.join(', ')}]` : ''}`;
  });
}

function sections(head: string[], streams: Record<string, string>): string {
  const body = Object.entries(streams)
    .filter(([, text]) => text.length > 0)
    .map(([name, text]) => `--- ${name}\n${text}`);
  return [...head.filter(Boolean), ...body].join('\n');
}
