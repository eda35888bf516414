import type { IncomingHttpHeaders } from 'node:http';
import { FORWARDED_HEADER } from '../contract/forwarded.js';

/** Whether another front door sent the request (it wants this one's own answer: contract/forwarded.ts). */
export function isForwarded(request: { headers: IncomingHttpHeaders }): boolean {
  return request.headers[FORWARDED_HEADER] !== undefined;
}
