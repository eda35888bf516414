import { resolve } from 'node:path';
import { constants } from 'node:os';
import { InvalidArgumentError, Option, type Command } from 'commander';
import { COMPRESSION_MODES, type CompressionMode } from '../compress/types.js';
import { defaultRoot } from './job-store.js';
import { LIMIT_FLOORS } from './limits.js';

/** Node's timers hold at most 2^31-1 ms. */
const MAX_SECONDS = 2_147_483;
const DEFAULT_UNTIL_S = 10;
const DEFAULT_MAX_BYTES = 65_536;
const DEFAULT_TAIL_LINES = 20;

/** Command-line parsers: a bad value becomes a usage error naming the option. */
export function seconds(text: string): number {
  const value = Number(text);
  if (text.trim() === '' || !Number.isFinite(value) || value < 0 || value > MAX_SECONDS) {
    throw new InvalidArgumentError(`expected seconds between 0 and ${MAX_SECONDS}`);
  }
  return value;
}

const DURATION_UNITS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86_400, w: 604_800 };

/** Seconds, from 45s, 90m, 12h, 30d, 2w or a bare number of seconds (no declared dependency parses these). */
export function duration(text: string): number {
  const match = /^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$/i.exec(text);
  if (!match) throw new InvalidArgumentError('expected a duration such as 30d, 12h, 90m or 45s');
  return Number(match[1]) * DURATION_UNITS[(match[2] || 's').toLowerCase()]!;
}

export function count(text: string): number {
  const value = Number(text);
  if (!/^\d+$/.test(text.trim()) || !Number.isSafeInteger(value)) throw new InvalidArgumentError('expected a whole number, 0 or more');
  return value;
}

const TAG = /^[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*$/;
const MAX_TAG_LENGTH = 128;

/** A repeatable --tag: dot-separated words of letters, digits and hyphens (ci, project.build), as tumf/agent-exec has them. */
export function tags(text: string, previous: string[]): string[] {
  if (!TAG.test(text) || text.length > MAX_TAG_LENGTH) {
    throw new InvalidArgumentError(`expected words of letters, digits and hyphens joined by dots, such as ci or project.build (at most ${MAX_TAG_LENGTH} characters)`);
  }
  return previous.includes(text) ? previous : [...previous, text];
}

export function httpUrl(text: string): string {
  const url = URL.canParse(text) ? new URL(text) : null;
  if (url === null || (url.protocol !== 'http:' && url.protocol !== 'https:')) throw new InvalidArgumentError('expected an http:// or https:// URL');
  return url.href;
}

/** TERM, SIGTERM, term or 15 all name SIGTERM. */
export function signalName(text: string): NodeJS.Signals {
  const upper = text.trim().toUpperCase();
  const byNumber = Object.entries(constants.signals).find(([, number]) => String(number) === upper)?.[0];
  const name = byNumber ?? (upper.startsWith('SIG') ? upper : `SIG${upper}`);
  if (!(name in constants.signals)) throw new InvalidArgumentError('expected a signal name such as TERM, KILL, INT or HUP');
  return name as NodeJS.Signals;
}

export interface RootFlags {
  root?: string;
}

export function addRootOption(command: Command): Command {
  return command.option('--root <dir>', 'where jobs are kept (default: $AGENT_EXEC_ROOT, else $XDG_DATA_HOME/agent-exec, else ~/.local/share/agent-exec)');
}

export function rootOf(flags: RootFlags): string {
  return flags.root !== undefined ? resolve(flags.root) : defaultRoot(process.env);
}

/** How run and restart look at the job before answering. */
export interface ObserveFlags extends RootFlags {
  until: number;
  wait: boolean;
  forever?: boolean;
  maxBytes: number;
  tailLines: number;
  compress: CompressionMode;
}

export function addObserveOptions(command: Command): Command {
  return addRootOption(command)
    .addOption(untilOption())
    .addOption(new Option('--no-wait', 'answer as soon as the job has started').conflicts(['until', 'forever']))
    .addOption(foreverOption())
    .addOption(maxBytesOption())
    .addOption(new Option('--tail-lines <n>', 'lines of each stream in the snapshot').argParser(count).default(DEFAULT_TAIL_LINES))
    .addOption(new Option('--compress <mode>', 'compress the excerpts for an agent as well (the raw excerpts stay)').choices(COMPRESSION_MODES).default('route'));
}

export function untilOption(): Option {
  return new Option('--until <seconds>', 'wait at most this long for the job to end').argParser(seconds).default(DEFAULT_UNTIL_S);
}

export function foreverOption(): Option {
  return new Option('--forever', 'wait until the job ends, however long').conflicts(['until']);
}

export function maxBytesOption(): Option {
  return new Option('--max-bytes <n>', 'bytes of each stream to include').argParser(count).default(DEFAULT_MAX_BYTES);
}

/** The wait, in ms, that --until/--forever/--no-wait ask for (null: no deadline). */
export function waitMs(flags: { until: number; wait?: boolean; forever?: boolean }): number | null {
  if (flags.wait === false) return 0;
  if (flags.forever) return null;
  return Math.round(flags.until * 1000);
}

const UNITS: Record<string, number> = { '': 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3, t: 1024 ** 4 };

/** A size for the command line: bytes, or a number with K, M, G or T (powers of 1024; KiB, MB... alike). */
export function byteSize(floor: number): (text: string) => number {
  return (text: string) => {
    const match = /^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$/i.exec(text);
    const value = match ? Math.floor(Number(match[1]) * UNITS[match[2]!.toLowerCase()]!) : NaN;
    if (!Number.isSafeInteger(value) || value < floor) throw new InvalidArgumentError(`expected a size of at least ${floor} bytes, such as 512M or 4GiB`);
    return value;
  };
}

export function processCount(text: string): number {
  const value = Number(text);
  if (!/^\s*\d+\s*$/.test(text) || !Number.isSafeInteger(value) || value < LIMIT_FLOORS.max_processes) {
    throw new InvalidArgumentError(`expected a whole number of at least ${LIMIT_FLOORS.max_processes}`);
  }
  return value;
}

export function cpuCount(text: string): number {
  const value = Number(text);
  if (text.trim() === '' || !Number.isFinite(value) || value < 0.01 || value > 4096) throw new InvalidArgumentError('expected cores, such as 2 or 0.5');
  return value;
}
