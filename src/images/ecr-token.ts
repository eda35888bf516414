import { createHash, createHmac } from 'node:crypto';
import { failure } from './registry-client.js';

/** An AWS access key, as E2B's `fromAWSRegistry` sends it. */
export interface AwsAccessKey {
  accessKeyId: string;
  secretAccessKey: string;
  region: string;
}

/** A request as Signature Version 4 signs it: the headers given are all signed. */
export interface SignedRequest {
  method: string;
  url: string;
  headers: Record<string, string>;
  body: string;
}

const sha256 = (data: string) => createHash('sha256').update(data).digest('hex');
const hmac = (key: string | Buffer, data: string) => createHmac('sha256', key).update(data).digest();

/**
 * The Authorization header of AWS's Signature Version 4 for `request` at `now` (its x-amz-date
 * header is set from it): the canonical request, the string to sign, the key derived for the
 * day, region and service. Query parameters are signed sorted, as AWS canonicalizes them.
 */
export function signV4(request: SignedRequest, key: Omit<AwsAccessKey, 'region'>, region: string, service: string, now: Date): Record<string, string> {
  const stamp = now
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d{3}/, '');
  const day = stamp.slice(0, 8);
  const url = new URL(request.url);
  const headers: Record<string, string> = { ...request.headers, host: url.host, 'x-amz-date': stamp };
  const names = Object.keys(headers)
    .map((name) => name.toLowerCase())
    .sort();
  const lower = Object.fromEntries(Object.entries(headers).map(([name, value]) => [name.toLowerCase(), value.trim().replace(/\s+/g, ' ')]));
  const query = [...url.searchParams.entries()]
    .map(([name, value]) => [encodeURIComponent(name), encodeURIComponent(value)] as const)
    .sort(([a, x], [b, y]) => (a === b ? (x < y ? -1 : 1) : a < b ? -1 : 1))
    .map(([name, value]) => `${name}=${value}`)
    .join('&');
  const canonical = [request.method, url.pathname || '/', query, ...names.map((name) => `${name}:${lower[name]}`), '', names.join(';'), sha256(request.body)].join('\n');
  const scope = `${day}/${region}/${service}/aws4_request`;
  const toSign = ['AWS4-HMAC-SHA256', stamp, scope, sha256(canonical)].join('\n');
  const signingKey = hmac(hmac(hmac(hmac(`AWS4${key.secretAccessKey}`, day), region), service), 'aws4_request');
  const signature = createHmac('sha256', signingKey).update(toSign).digest('hex');
  return { ...headers, authorization: `AWS4-HMAC-SHA256 Credential=${key.accessKeyId}/${scope}, SignedHeaders=${names.join(';')}, Signature=${signature}` };
}

/**
 * The credentials an ECR registry takes for `key`: ECR's GetAuthorizationToken, signed with the
 * key, answers a token of `AWS:password` (for 12 hours), which the registry takes as basic
 * credentials. `endpoint`: ECR's API for the key's region, unless given.
 */
export async function ecrCredentials(
  key: AwsAccessKey,
  timeoutMs: number,
  endpoint = `https://api.ecr.${key.region}.amazonaws.com/`,
): Promise<{ username: string; password: string }> {
  if (!/^[a-z0-9-]{1,32}$/.test(key.region)) throw failure('image.registry_denied', `fromAWSRegistry's region ${JSON.stringify(key.region)} is not an AWS region`);
  const request: SignedRequest = {
    method: 'POST',
    url: endpoint,
    headers: { 'content-type': 'application/x-amz-json-1.1', 'x-amz-target': 'AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken' },
    body: '{}',
  };
  let response: Response;
  try {
    response = await fetch(endpoint, { method: 'POST', headers: signV4(request, key, key.region, 'ecr', new Date()), body: request.body, signal: AbortSignal.timeout(timeoutMs) });
  } catch (error) {
    throw failure('image.registry_failed', `ECR's API at ${new URL(endpoint).host} could not be reached: ${(error as Error).message}`);
  }
  const text = await response.text();
  if (response.status === 400 || response.status === 403) throw failure('image.registry_denied', `ECR refused the AWS key's token (${response.status}): ${text.slice(0, 200)}`);
  if (!response.ok) throw failure('image.registry_failed', `ECR's API answered ${response.status}`);
  const token = (JSON.parse(text) as { authorizationData?: { authorizationToken?: unknown }[] }).authorizationData?.[0]?.authorizationToken;
  const decoded = typeof token === 'string' ? Buffer.from(token, 'base64').toString('utf8') : '';
  const colon = decoded.indexOf(':');
  if (colon <= 0) throw failure('image.registry_failed', 'ECR answered no authorization token');
  return { username: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}
