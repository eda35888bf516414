import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createConfig, lintFromString } from '@redocly/openapi-core';
import { Validator } from '@seriousme/openapi-schema-validator';
import openapiTS, { astToString } from 'openapi-typescript';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { ERROR_CODES, type ErrorCode } from '../../../src/contract/errors.js';
import { forGeneratedClients } from '../../../src/http/openapi-clients.js';
import { fakeService } from '../../helpers/fake-service.js';
import { generatedClient, type GeneratedClient } from '../../helpers/openapi-client.js';

/**
 * /openapi.json as a remote client reads it (in-process: inject() against the app the service
 * builds; test/integration/security/service-auth.test.ts fetches it from a real service): a valid OpenAPI 3.1 document (the validator's
 * verdict, and every schema in it a JSON Schema 2020-12 that Ajv compiles in strict mode), with
 * every route, the bearer scheme, and per route the error statuses it answers with and the codes
 * each carries, as the code table says.
 */

interface Operation {
  security?: unknown[];
  tags?: string[];
  requestBody?: { content: Record<string, unknown> };
  responses: Record<string, { description: string; content?: Record<string, { schema: unknown }> }>;
}
interface OpenApiDocument {
  openapi: string;
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, unknown>; securitySchemes: Record<string, { type: string; scheme: string }> };
  security?: unknown[];
}

const METHODS = ['get', 'put', 'post', 'delete', 'patch'];
/** The routes that gate their body's media type (415). */
const JSON_ROUTES = [
  'post /v1/jobs',
  'post /v1/exec',
  'post /v1/tasks',
  'post /v1/sessions',
  'post /v1/sessions/{session_id}/exec',
  'put /v1/sessions/{session_id}/files/{path}',
  'post /v1/sandboxes',
  'post /v1/sandboxes/{sandbox_id}/timeout',
  'post /v1/sandboxes/{sandbox_id}/exec',
  'post /v1/sandboxes/{sandbox_id}/run_code',
  'post /v1/sandboxes/{sandbox_id}/pause',
  'post /v1/sandboxes/{sandbox_id}/resume',
  'post /v1/sandboxes/{sandbox_id}/fork',
  'post /v1/sandboxes/{sandbox_id}/snapshots',
  'put /v1/sandboxes/{sandbox_id}/files/{path}',
  'post /v1/volumes',
  'put /v1/sandboxes/{sandbox_id}/sync',
  'put /v1/volumes/{volume}/sync',
  'post /v1/templates',
  'put /v1/templates/{name}',
];
/** The routes whose body is not JSON only: a job's workspace may be a multipart upload; a session file is its bytes. */
const BODY_TYPES: Record<string, string[]> = {
  'post /v1/jobs': ['application/json', 'multipart/form-data'],
  'put /v1/sessions/{session_id}/files/{path}': ['application/octet-stream'],
  'put /v1/sandboxes/{sandbox_id}/files/{path}': ['application/octet-stream'],
  'put /v1/templates/{name}': ['application/x-tar'],
  'put /v1/sandboxes/{sandbox_id}/sync': ['application/x-tar', 'application/gzip'],
  'put /v1/volumes/{volume}/sync': ['application/x-tar', 'application/gzip'],
};
/** Codes a route sends with another status than the table's: refusals of what is usually a result. */
const STATUS_OVERRIDES: Record<string, Partial<Record<ErrorCode, number>>> = {
  'post /v1/jobs': { 'backend.unavailable': 503 },
  'post /v1/sessions': { 'backend.unavailable': 503, 'backend.setup_failed': 500 },
  'post /v1/sandboxes': { 'backend.unavailable': 503, 'backend.setup_failed': 500 },
  'post /v1/sessions/{session_id}/exec': { 'policy.command_denied': 403, 'policy.shell_denied': 403 },
  'post /v1/sandboxes/{sandbox_id}/pause': { 'backend.unavailable': 503 },
  'post /v1/sandboxes/{sandbox_id}/resume': { 'backend.unavailable': 503 },
  'post /v1/sandboxes/{sandbox_id}/fork': { 'backend.unavailable': 503 },
  'post /v1/sandboxes/{sandbox_id}/snapshots': { 'backend.unavailable': 503 },
};

function operations(document: OpenApiDocument): Array<[string, Operation]> {
  return Object.entries(document.paths).flatMap(([path, item]) =>
    Object.entries(item)
      .filter(([method]) => METHODS.includes(method))
      .map(([method, operation]): [string, Operation] => [`${method} ${path}`, operation]),
  );
}

/** The validator's verdict, failing with its errors; then each schema, strictly, as JSON Schema 2020-12. */
async function assertValid(document: OpenApiDocument): Promise<void> {
  const verdict = await new Validator().validate(document as unknown as Record<string, unknown>);
  assert.ok(verdict.valid, `not a valid OpenAPI ${document.openapi} document:\n${JSON.stringify(verdict.errors, null, 2)}`);
  // The 3.1 schema takes any object as a Schema Object: Ajv checks them against the 2020-12
  // meta-schema, and strict mode refuses what 2020-12 does not define (OpenAPI 3.0's nullable).
  const ajv = new Ajv2020({ strict: true, validateFormats: false });
  ajv.addVocabulary(['discriminator', 'xml', 'externalDocs', 'example']);
  const base = 'https://agent-runner.invalid/components';
  const local = (schema: unknown) => JSON.parse(JSON.stringify(schema).replaceAll('"#/components/schemas/', `"${base}#/$defs/`)) as object;
  ajv.addSchema({ $id: base, $defs: local(document.components.schemas) });
  const problems: string[] = [];
  // Ajv caches by the schema object, and the same schema (an error body's $ref) is written out at
  // hundreds of places: each text is compiled once, its problem named at its first place.
  const compiled = new Set<string>();
  const compile = (where: string, schema: unknown) => {
    const text = JSON.stringify(schema);
    if (compiled.has(text)) return;
    compiled.add(text);
    try {
      ajv.compile(local(schema));
    } catch (error) {
      problems.push(`${where}: ${(error as Error).message}`);
    }
  };
  for (const name of Object.keys(document.components.schemas)) compile(`components.schemas.${name}`, { $ref: `#/components/schemas/${name}` });
  const visit = (node: unknown, where: string): void => {
    if (typeof node !== 'object' || node === null) return;
    for (const [key, value] of Object.entries(node)) {
      if (key === 'schema') compile(`${where}.schema`, value);
      else visit(value, `${where}.${key}`);
    }
  };
  visit(document.paths, 'paths');
  assert.deepEqual(problems, [], 'every schema compiles strictly as JSON Schema 2020-12');
}

/** A schema, or the component it refers to. */
function resolved(document: OpenApiDocument, schema: unknown): unknown {
  const ref = (schema as { $ref?: string } | undefined)?.$ref;
  return ref?.startsWith('#/components/schemas/') ? document.components.schemas[ref.slice('#/components/schemas/'.length)] : schema;
}

/** The operations that take no token: /health, and a template build's upload, signed instead. */
const OPEN_OPERATIONS = ['get /health', 'put /templates/{templateID}/files/{hash}/upload'];

/** Routes that speak Piston's API, errors included. */
const PISTON_ROUTES = ['get /api/v2/runtimes', 'post /api/v2/execute'];

/** What each error status of each operation says: its codes, from the `- `code`: meaning` lines. */
function assertErrorResponses(document: OpenApiDocument, authenticated: boolean): void {
  for (const [name, operation] of operations(document)) {
    const open = OPEN_OPERATIONS.includes(name) || !authenticated;
    assert.equal('401' in operation.responses, !open, `${name}: 401 where the token is required`);
    if (PISTON_ROUTES.includes(name)) {
      // Piston's dialect: its own failures are Piston's `{message}`; only our auth's 401 is ours.
      const expected = ['200', ...(name.startsWith('post') ? ['400'] : []), ...(open ? [] : ['401'])];
      assert.deepEqual(Object.keys(operation.responses).sort(), expected.sort(), name);
      continue;
    }
    if (operation.tags?.includes('e2b')) {
      // E2B's dialect: every failure, our auth's 401 included, is E2B's `{code, message}`.
      for (const [status, response] of Object.entries(operation.responses)) {
        if (Number(status) < 400) continue;
        const schema = resolved(document, response.content?.['application/json']?.schema) as { properties?: Record<string, unknown> } | undefined;
        assert.deepEqual(Object.keys(schema?.properties ?? {}).sort(), ['code', 'message'], `${name} ${status}: E2B's error shape`);
      }
      continue;
    }
    assert.equal('415' in operation.responses, JSON_ROUTES.includes(name), `${name}: 415 on the JSON routes`);
    for (const status of ['400', '408', '413', '500']) assert.ok(operation.responses[status], `${name}: any request may be answered ${status}`);
    for (const [status, response] of Object.entries(operation.responses)) {
      if (Number(status) < 400) continue;
      assert.deepEqual(response.content, { 'application/json': { schema: { $ref: '#/components/schemas/ErrorBody' } } }, `${name} ${status}`);
      const codes = response.description.split('\n').map((line) => /^- `([a-z_.]+)`: (.+)$/.exec(line));
      assert.ok(codes.length > 0, `${name} ${status} names its codes`);
      for (const match of codes) {
        assert.ok(match, `${name} ${status}: ${response.description}`);
        const code = match[1] as ErrorCode;
        assert.ok(code in ERROR_CODES, `${name} ${status}: ${code} is in the code table`);
        assert.equal(match[2], ERROR_CODES[code].description);
        assert.equal(Number(status), STATUS_OVERRIDES[name]?.[code] ?? ERROR_CODES[code].http, `${name}: ${code} under its status`);
      }
    }
  }
  const listing = document.paths['/v1/jobs']!.get!.responses['400']!.description;
  assert.match(listing, /validation\.invalid_cursor/);
  assert.match(document.paths['/v1/jobs']!.post!.responses['503']!.description, /queue\.full[\s\S]*store\.unavailable/);
}

describe('the OpenAPI document', () => {
  it('is valid OpenAPI 3.1 with a token: the bearer scheme required on every route but /health, every error status described', async () => {
    const service = await fakeService();
    try {
      const { status, json } = await service.api('GET', '/openapi.json');
      assert.equal(status, 200);
      const document = json as OpenApiDocument;
      await assertValid(document);
      assert.equal(document.openapi, '3.1.0');
      assert.equal(document.components.securitySchemes.bearer?.type, 'http');
      assert.equal(document.components.securitySchemes.bearer?.scheme, 'bearer');
      assert.deepEqual(document.security, [{ bearer: [] }]);
      assert.deepEqual(document.paths['/health']!.get!.security, [], '/health needs no token');
      for (const [name, operation] of operations(document))
        if (!OPEN_OPERATIONS.includes(name)) assert.equal(operation.security, undefined, `${name} takes the document's requirement`);
      assertErrorResponses(document, true);
      // Every operation has an id, each its own.
      const ids = operations(document).map(([, operation]) => (operation as { operationId?: string }).operationId);
      assert.ok(
        ids.every((id) => typeof id === 'string' && /^[a-z]+[A-Za-z0-9]+$/.test(id)),
        JSON.stringify(ids),
      );
      assert.equal(new Set(ids).size, ids.length);
      assert.ok(ids.includes('postV1Jobs') && ids.includes('getV1JobsByJobId'), JSON.stringify(ids));
      // A shared schema is named after its contract type (fastify-swagger's own names were def-0, def-1...).
      for (const name of Object.keys(document.components.schemas)) assert.match(name, /^[A-Z][A-Za-z0-9]*$/, `component ${name}`);
      assert.ok('SandboxCodeResult' in document.components.schemas && 'Session' in document.components.schemas, Object.keys(document.components.schemas).join(' '));
      // The error body names every code of the table.
      const body = JSON.stringify(document.components.schemas.ErrorBody);
      for (const code of Object.keys(ERROR_CODES)) assert.ok(body.includes(`"${code}"`), `ErrorBody lists ${code}`);
      // The artifact route's wildcard is a named parameter, and the route still serves by it.
      const download = document.paths['/v1/jobs/{job_id}/artifacts/{path}']?.get as (Operation & { parameters: Array<{ name: string; in: string }> }) | undefined;
      assert.deepEqual(
        download?.parameters.map((parameter) => `${parameter.in}:${parameter.name}`),
        ['path:job_id', 'path:path'],
      );
      for (const name of JSON_ROUTES) {
        const [method, path] = name.split(' ') as [string, string];
        assert.deepEqual(Object.keys(document.paths[path]![method]!.requestBody!.content), BODY_TYPES[name] ?? ['application/json'], `${name} takes its media types`);
      }
    } finally {
      await service.close();
    }
  });

  it('is valid without auth (--no-auth): the scheme declared, required nowhere, no 401', async () => {
    const service = await fakeService({ token: null });
    try {
      const { status, json } = await service.api('GET', '/openapi.json');
      assert.equal(status, 200);
      const document = json as OpenApiDocument;
      await assertValid(document);
      assert.equal(document.components.securitySchemes.bearer?.scheme, 'bearer');
      assert.equal(document.security, undefined);
      for (const [name, operation] of operations(document)) assert.equal(operation.security, undefined, name);
      assertErrorResponses(document, false);
    } finally {
      await service.close();
    }
  });

  it('documents every route the service registers', async () => {
    const service = await fakeService({ token: null });
    try {
      const document = (await service.api('GET', '/openapi.json')).json as OpenApiDocument;
      const documented = operations(document);
      // Each documented operation is a route (Fastify's syntax: `:name`, the wildcard `*`)...
      for (const [name] of documented) {
        const [method, path] = name.split(' ') as [string, string];
        const url = path.replace('{path}', '*').replace(/\{(\w+)\}/g, ':$1');
        assert.ok(service.app.hasRoute({ method: method.toUpperCase() as 'GET', url }), `${name} is a route`);
      }
      // ...and there are as many as the router has (HEAD answers beside each GET, by Fastify).
      // The dashboard's subtree (/ui and its static files) is a page, not the API.
      let inDashboard = false;
      const registered = service.app
        .printRoutes({ commonPrefix: false })
        .split('\n')
        .filter((line) => {
          if (/^[├└]── /.test(line)) inDashboard = /^[├└]── \/ui\b/.test(line);
          return !inDashboard;
        })
        .flatMap((line) => /\(([A-Z, ]+)\)\s*$/.exec(line)?.[1]?.split(', ') ?? [])
        .filter((method) => method !== 'HEAD');
      assert.equal(documented.length, registered.length, `documented: ${documented.map(([name]) => name).join(', ')}`);
    } finally {
      await service.close();
    }
  });

  it("lints clean with Redocly's recommended rules, none turned off, but for the one ambiguity of E2B's paths", async () => {
    const service = await fakeService();
    try {
      const { text } = await service.api('GET', '/openapi.json');
      const config = await createConfig({ extends: ['recommended'] });
      const problems = await lintFromString({ source: text, absoluteRef: '/openapi.json', config });
      // One warning, which E2B's own API has: its paths /templates/aliases/{alias} and
      // /templates/{templateID}/tags both match /templates/aliases/tags (the router takes the
      // static segment first, as E2B's does). The SDK calls both, so both are served as E2B names them.
      assert.deepEqual(
        problems.map((problem) => `${problem.severity} ${problem.ruleId}: ${problem.message} (${problem.location[0]?.pointer ?? ''})`),
        [
          'warn no-ambiguous-paths: Paths should resolve unambiguously. Found two ambiguous paths: `/templates/aliases/{alias}` and `/templates/{templateID}/tags`. (#/paths/~1templates~1{templateID}~1tags)',
        ],
      );
    } finally {
      await service.close();
    }
  });

  it("maps each discriminator's values to its alternatives, the values the service reads (not the alternatives' names)", async () => {
    const service = await fakeService();
    try {
      const document = (await service.api('GET', '/openapi.json')).json as OpenApiDocument;
      type Union = { oneOf: Array<{ $ref: string }>; discriminator: { propertyName: string; mapping?: Record<string, string> } };
      const unions: Union[] = [];
      const visit = (node: unknown): void => {
        if (typeof node !== 'object' || node === null) return;
        if ('discriminator' in node && 'oneOf' in node) unions.push(node as Union);
        for (const value of Object.values(node)) visit(value);
      };
      visit(document);
      const request = document.components.schemas.RunJobRequest as { properties: Record<string, unknown> };
      assert.deepEqual((request.properties.workspace as Union).discriminator, {
        propertyName: 'source',
        mapping: { local_path: '#/components/schemas/LocalPathWorkspace', inline: '#/components/schemas/InlineWorkspace', archive: '#/components/schemas/ArchiveWorkspace' },
      });
      // Any other discriminator: each alternative under the one value it allows the property.
      for (const { oneOf, discriminator } of unions) {
        const values = oneOf.map(({ $ref }) => (resolved(document, { $ref }) as { properties: Record<string, { enum: string[] }> }).properties[discriminator.propertyName]!.enum);
        assert.deepEqual(discriminator.mapping, Object.fromEntries(oneOf.map(({ $ref }, index) => [values[index]![0], $ref])), JSON.stringify(oneOf));
      }
    } finally {
      await service.close();
    }
  });

  it('writes a request body without the defaults that would make a generated client require them; an answer keeps them', async () => {
    const service = await fakeService();
    try {
      const document = (await service.api('GET', '/openapi.json')).json as OpenApiDocument;
      const request = document.components.schemas.RunJobRequest as { properties: { policy: { properties: Record<string, { default?: unknown; description?: string }> } } };
      const { allow_shell } = request.properties.policy.properties;
      assert.deepEqual(allow_shell, { type: 'boolean', description: 'Default: false.' });
    } finally {
      await service.close();
    }
    // openapi-typescript requires a property with a default (defaultNonNullable) unless written
    // inline in a requestBody: what the service answers keeps its default, and is required.
    const schema = { type: 'object', properties: { flag: { type: 'boolean', default: false } } };
    const body = (name: string) => ({ content: { 'application/json': { schema: { $ref: `#/components/schemas/${name}` } } } });
    const document = {
      openapi: '3.1.0',
      info: { title: 'defaults', version: '1' },
      paths: { '/ask': { post: { requestBody: body('Ask'), responses: { 200: { description: 'the answer', ...body('Answer') } } } } },
      components: { schemas: { Ask: schema, Answer: schema } },
    };
    const types = astToString(await openapiTS(forGeneratedClients(document) as never));
    assert.match(types, /Ask: \{[^}]*flag\?: boolean;/);
    assert.match(types, /Answer: \{[^}]*flag: boolean;/);
  });

  it('names every JSON body after its contract type, and a client generated from it (openapi-typescript, openapi-fetch) type-checks strictly by those names', async () => {
    const service = await fakeService();
    let client: GeneratedClient | undefined;
    try {
      const document = (await service.api('GET', '/openapi.json')).json as OpenApiDocument;
      const byName = (schema: unknown) => {
        const { $ref, items } = schema as { $ref?: string; items?: { $ref?: string } };
        return ($ref ?? items?.$ref)?.startsWith('#/components/schemas/') === true;
      };
      for (const [name, operation] of operations(document)) {
        if (name === 'get /openapi.json') continue;
        const json = operation.requestBody?.content['application/json'] as { schema: unknown } | undefined;
        if (json) assert.ok(byName(json.schema), `${name}: its body by name`);
        for (const [status, response] of Object.entries(operation.responses)) {
          const answer = response.content?.['application/json'];
          if (answer) assert.ok(byName(answer.schema), `${name} ${status}: its answer by name`);
        }
      }
      // What a user of the document does: generate the types, and call through them.
      client = await generatedClient(
        document,
        [
          "import createClient from 'openapi-fetch';",
          "import type { components, paths } from './api.js';",
          "type RunJobRequest = components['schemas']['RunJobRequest'];",
          "type JobState = components['schemas']['JobState'];",
          "const client = createClient<paths>({ baseUrl: 'http://127.0.0.1:8080' });",
          'export async function run(request: RunJobRequest): Promise<JobState | undefined> {',
          "  const accepted = await client.POST('/v1/jobs', { body: request });",
          '  if (!accepted.data) return undefined;',
          "  const state = await client.GET('/v1/jobs/{job_id}', { params: { path: { job_id: accepted.data.job_id }, query: { wait: 5 } } });",
          "  const result: components['schemas']['RunJobResult'] | undefined = state.data?.result;",
          '  return result ? state.data : undefined;',
          '}',
          // What the service fills in (a policy's allow_shell and network, a file's encoding) a
          // request may leave out, and a workspace is told apart by its source's value.
          "const defaulted: RunJobRequest = { command: { argv: ['true'] }, policy: { allowed_env: [] } };",
          'export async function inline(): Promise<void> {',
          "  const workspace = { source: 'inline' as const, files: [{ path: 'a.txt', content: 'hi' }] };",
          "  await client.POST('/v1/jobs', { body: { ...defaulted, workspace } });",
          "  await client.POST('/v1/exec', { body: { lang: 'python', code: '', files: [{ name: 'b.py', content: '' }] } });",
          "  await client.POST('/v1/sessions', { body: { lang: 'python' } });",
          '}',
          'export async function wrong(): Promise<void> {',
          '  // @ts-expect-error a RunJobRequest has a command',
          "  await client.POST('/v1/jobs', { body: { timeout_ms: 1 } });",
          '  // @ts-expect-error the source is the value the service reads, not the name of its schema',
          "  await client.POST('/v1/jobs', { body: { ...defaulted, workspace: { source: 'InlineWorkspace', files: [] } } });",
          "  const error = (await client.POST('/v1/exec', { body: { trace_id: 't', lang: 'python', code: '' } })).error;",
          "  const code: components['schemas']['ErrorBody']['error']['code'] | undefined = error?.error.code;",
          '  void code;',
          '}',
          '',
        ].join('\n'),
      );
      assert.deepEqual(client.diagnostics(), []);
    } finally {
      await client?.remove();
      await service.close();
    }
  });
});
