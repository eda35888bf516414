import { randomBytes } from 'node:crypto';
import { AgentExecError, usageError } from './errors.js';
import { listJobIds } from './job-store.js';

/** Random hex, so any few leading characters already tell jobs apart (as with git or docker ids). */
export function newJobId(): string {
  return randomBytes(6).toString('hex');
}

const LISTED_CANDIDATES = 5;

/** The full id a caller meant: itself, or the only id it is a prefix of. */
export async function resolveJobId(root: string, query: string): Promise<string> {
  if (query === '') throw usageError('the job id is empty');
  const ids = await listJobIds(root);
  if (ids.includes(query)) return query;
  const matches = ids.filter((id) => id.startsWith(query)).sort();
  if (matches.length === 1) return matches[0]!;
  if (matches.length === 0) throw new AgentExecError('job_not_found', `no job ${JSON.stringify(query)} under ${root}`);
  const listed = matches.slice(0, LISTED_CANDIDATES).join(', ');
  const more = matches.length > LISTED_CANDIDATES ? `, and ${matches.length - LISTED_CANDIDATES} more` : '';
  throw new AgentExecError('ambiguous_job_id', `${JSON.stringify(query)} is the start of ${matches.length} job ids (${listed}${more}): give more of it`);
}
