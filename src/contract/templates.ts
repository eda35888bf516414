import { Type, type Static } from '@sinclair/typebox';

const TemplateName = Type.String({
  pattern: '^[a-z0-9][a-z0-9._-]{0,63}(:[a-z0-9][a-z0-9._-]{0,59})?$',
  description: "Lowercase letters, digits, '.', '_' and '-', at most 64; `name:tag` names a tag of it (E2B's), `name` alone its `default` tag.",
});

export const ImageRunConfigSchema = Type.Object(
  {
    env: Type.Array(Type.String(), { description: 'NAME=value pairs its processes start with (the image config’s Env).' }),
    entrypoint: Type.Union([Type.Array(Type.String()), Type.Null()]),
    cmd: Type.Union([Type.Array(Type.String()), Type.Null()]),
    workingDir: Type.Union([Type.String(), Type.Null()]),
    user: Type.Union([Type.String(), Type.Null()]),
    exposedPorts: Type.Array(Type.String()),
    labels: Type.Record(Type.String(), Type.String()),
  },
  { $id: 'ImageRunConfig', additionalProperties: false, description: 'What the image’s config says its containers start with.' },
);
export type ImageRunConfig = Static<typeof ImageRunConfigSchema>;

export const TemplateStartSchema = Type.Object(
  {
    command: Type.String({ description: 'Started in the background, by a shell, as each sandbox of the template starts (E2B’s setStartCmd).' }),
    ready: Type.Union([Type.String(), Type.Null()], {
      description: 'Run until it exits 0, before the create answers (E2B’s setReadyCmd); null: the create does not wait.',
    }),
  },
  { additionalProperties: false },
);
export type TemplateStart = Static<typeof TemplateStartSchema>;

export const TemplateSchema = Type.Object(
  {
    name: TemplateName,
    kind: Type.Union([Type.Literal('host'), Type.Literal('image')], {
      description: 'host: the host’s own system (base, code-interpreter-v1, desktop, those of the configuration); image: made of an image.',
    }),
    image: Type.Optional(Type.String({ description: 'The image’s digest in the store (its manifest’s; an archive without one: its config’s).' })),
    source: Type.Optional(Type.String({ description: 'The reference it was pulled by, or archive: and the upload’s name.' })),
    config: Type.Optional(ImageRunConfigSchema),
    bytes: Type.Optional(Type.Integer({ minimum: 0, description: 'Its layers’ files, unpacked.' })),
    created_at: Type.Optional(Type.String({ format: 'date-time' })),
    start: Type.Optional(TemplateStartSchema),
    api_key: Type.Optional(
      Type.String({ description: 'The name of the API key that made it (absent: the service token); only it, or the service token, replaces or deletes it.' }),
    ),
    build_id: Type.Optional(Type.String({ description: 'The build that made its image (E2B’s build ID): the tags of one build share it.' })),
    published: Type.Optional(
      Type.String({ description: 'The digest of its image in the cluster’s distribution repository (templates.distribution), where every machine of the cluster finds it.' }),
    ),
  },
  { $id: 'Template', additionalProperties: false },
);
export type Template = Static<typeof TemplateSchema>;

export const TemplateListSchema = Type.Object({ templates: Type.Array(TemplateSchema) }, { $id: 'TemplateList', additionalProperties: false });

export const TemplateCreateRequestSchema = Type.Object(
  {
    name: TemplateName,
    image: Type.String({
      minLength: 1,
      maxLength: 512,
      description: 'An image reference, pulled from its registry (distribution API v2): registry/repository:tag or @sha256:digest; Docker Hub when no registry is named.',
      examples: ['127.0.0.1:5000/tools:1.2', 'python:3.12-slim'],
    }),
  },
  { $id: 'TemplateCreateRequest', additionalProperties: false },
);
export type TemplateCreateRequest = Static<typeof TemplateCreateRequestSchema>;
