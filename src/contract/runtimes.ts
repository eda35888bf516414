import { Type, type Static } from '@sinclair/typebox';

/** A language this runner can run now, as snippets and Piston's API name it. */
export const RuntimeSchema = Type.Object(
  {
    language: Type.String({ description: 'The name a snippet’s `lang` takes.' }),
    version: Type.String({ description: 'The toolchain’s version number; a snippet’s `version` matches it by leading parts.' }),
    aliases: Type.Array(Type.String(), { description: 'Other names `lang` accepts.' }),
    runtime: Type.Optional(Type.String({ description: 'The engine, where it differs from the language (node runs javascript).' })),
  },
  { $id: 'Runtime', additionalProperties: false },
);
export type Runtime = Static<typeof RuntimeSchema>;
export const RuntimeListSchema = Type.Array(RuntimeSchema, { $id: 'RuntimeList' });
