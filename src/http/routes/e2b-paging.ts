import type { FastifyReply } from 'fastify';

export const DEFAULT_PAGE = 100;

interface PageRequest {
  limit: number;
  nextToken: string | undefined;
  /** By key: `asc` (the default) or `desc`. */
  order?: 'asc' | 'desc';
}

/**
 * One page of `items` in the order of `keyOf` (unique keys), after the key `nextToken` carries;
 * when more follow, `x-next-token` names the last key given, as E2B's listings page.
 */
export function pageOf<T>(items: T[], keyOf: (item: T) => string, { limit, nextToken, order = 'asc' }: PageRequest, reply: FastifyReply): T[] {
  const direction = order === 'asc' ? 1 : -1;
  // Code-point order, the order of the comparison that finds where the next page starts.
  const compare = (a: string, b: string) => direction * (a < b ? -1 : a > b ? 1 : 0);
  const sorted = [...items].sort((a, b) => compare(keyOf(a), keyOf(b)));
  const after = nextToken === undefined ? null : Buffer.from(nextToken, 'base64url').toString('utf8');
  const from = after === null ? 0 : sorted.findIndex((item) => compare(keyOf(item), after) > 0);
  const page = from < 0 ? [] : sorted.slice(from, from + limit);
  const last = page.at(-1);
  if (last !== undefined && from + limit < sorted.length) void reply.header('x-next-token', Buffer.from(keyOf(last)).toString('base64url'));
  return page;
}
