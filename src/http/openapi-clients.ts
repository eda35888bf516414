/**
 * What the OpenAPI document says beyond the contract schemas, for the clients generated from it
 * (openapi-typescript with openapi-fetch, the most used for TypeScript): written into the
 * document only, as the contract schemas are also what the service validates with (Ajv), and
 * stay defined once.
 */

type Schema = Record<string, unknown>;
interface Document {
  paths?: Record<string, Record<string, unknown>>;
  components?: { schemas?: Record<string, unknown> };
}

const COMPONENT = '#/components/schemas/';
/** Keywords whose values are data, never schemas: a walk leaves them as they are. */
const DATA_KEYWORDS = new Set(['const', 'default', 'enum', 'example', 'examples']);
/** Keywords whose values are schemas by name, the names being no keywords. */
const SCHEMAS_BY_NAME = new Set(['properties', 'patternProperties', '$defs', 'dependentSchemas']);

/**
 * The document with each discriminator's mapping written out, and the defaults of what requests
 * send moved from `default` to the description.
 */
export function forGeneratedClients<D extends object>(document: D): D {
  const { paths = {}, components = {} } = document as Document;
  const schemas = components.schemas ?? {};
  const requested = reachedFromRequestBodies(paths, schemas);
  const mapped = (node: unknown) => eachSchema(node, (schema) => withDiscriminatorMapping(schema, schemas));
  const rewritten = Object.fromEntries(
    Object.entries(schemas).map(([name, schema]) => [name, requested.has(name) ? eachSchema(mapped(schema), withDefaultsDescribed) : mapped(schema)]),
  );
  return { ...document, paths: mapped(paths), components: { ...components, schemas: rewritten } };
}

/**
 * A discriminator's mapping, from the one value each alternative allows the property: without
 * one, OpenAPI takes the alternatives' component names for the values (`source:
 * "InlineWorkspace"`), and a generated client could not send the service's `inline`. The
 * contract leaves it out: Ajv's discriminator refuses a mapping.
 */
function withDiscriminatorMapping(schema: Schema, schemas: Record<string, unknown>): Schema {
  const { discriminator, oneOf } = schema;
  if (!isObject(discriminator) || discriminator.mapping !== undefined || !Array.isArray(oneOf)) return schema;
  const property = discriminator.propertyName as string;
  const mapping = Object.fromEntries(
    oneOf.map((alternative: unknown) => {
      const ref = isObject(alternative) ? alternative.$ref : undefined;
      const named = typeof ref === 'string' && ref.startsWith(COMPONENT) ? schemas[ref.slice(COMPONENT.length)] : undefined;
      const value = isObject(named) && isObject(named.properties) ? onlyValue(named.properties[property]) : undefined;
      // Inline alternatives have no name to map to: the discriminator would be a trap for clients.
      if (typeof value !== 'string') throw new Error(`a discriminator on ${property} needs named alternatives, each with one value of ${property}: ${JSON.stringify(alternative)}`);
      return [value, ref as string];
    }),
  );
  return { ...schema, discriminator: { ...discriminator, mapping } };
}

/** The one value a schema allows: its `const`, which the document writes as an enum of one. */
function onlyValue(schema: unknown): unknown {
  if (!isObject(schema)) return undefined;
  if ('const' in schema) return schema.const;
  return Array.isArray(schema.enum) && schema.enum.length === 1 ? schema.enum[0] : undefined;
}

/**
 * A request's properties without `default`, the value said in their description instead:
 * openapi-typescript makes a property with a default required (its defaultNonNullable, right
 * for what the service answers) unless the schema is written inline in a requestBody, and our
 * bodies are components, by name. The service fills these in, so a request may leave them out.
 * The components of answers keep theirs; one reached from a request body too is read as the
 * request's (optional: still true of the answer, only less precise).
 */
function withDefaultsDescribed(schema: Schema): Schema {
  if (!isObject(schema.properties)) return schema;
  const properties = Object.fromEntries(
    Object.entries(schema.properties).map(([name, property]) => {
      if (!isObject(property) || !('default' in property)) return [name, property];
      const { default: value, description, ...rest } = property;
      const said = `Default: ${JSON.stringify(value)}.`;
      return [name, { ...rest, description: typeof description === 'string' ? `${description} ${said}` : said }];
    }),
  );
  return { ...schema, properties };
}

/** The components a request body refers to, and those they refer to in turn. */
function reachedFromRequestBodies(paths: Record<string, Record<string, unknown>>, schemas: Record<string, unknown>): Set<string> {
  const reached = new Set<string>();
  const follow = (node: unknown): void => {
    if (typeof node !== 'object' || node === null) return;
    const ref = (node as Schema).$ref;
    const name = typeof ref === 'string' && ref.startsWith(COMPONENT) ? ref.slice(COMPONENT.length) : undefined;
    if (name !== undefined && !reached.has(name)) {
      reached.add(name);
      follow(schemas[name]);
    }
    for (const value of Object.values(node)) follow(value);
  };
  for (const item of Object.values(paths)) for (const operation of Object.values(item)) if (isObject(operation)) follow(operation.requestBody);
  return reached;
}

/** `node` with `rewrite` applied to each object in it, innermost first, data values left alone. */
function eachSchema(node: unknown, rewrite: (schema: Schema) => Schema): unknown {
  if (Array.isArray(node)) return node.map((item) => eachSchema(item, rewrite));
  if (!isObject(node)) return node;
  const walked = Object.fromEntries(
    Object.entries(node).map(([key, value]) => {
      if (DATA_KEYWORDS.has(key)) return [key, value];
      if (SCHEMAS_BY_NAME.has(key) && isObject(value)) return [key, Object.fromEntries(Object.entries(value).map(([name, schema]) => [name, eachSchema(schema, rewrite)]))];
      return [key, eachSchema(value, rewrite)];
    }),
  );
  return rewrite(walked);
}

function isObject(value: unknown): value is Schema {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
