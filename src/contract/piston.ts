import { Type, type Static } from '@sinclair/typebox';

/**
 * Piston's v2 API (github.com/engineer-man/piston), so its existing clients work unchanged:
 * the request and answer shapes as Piston documents them. Limits are in milliseconds and
 * bytes; -1 means "the server's".
 */
export const PistonExecuteSchema = Type.Object(
  {
    language: Type.String({ minLength: 1, maxLength: 64 }),
    version: Type.Optional(Type.String({ maxLength: 64, description: 'A version /api/v2/runtimes lists, a prefix of it, or "*".' })),
    files: Type.Array(
      Type.Object({
        name: Type.Optional(Type.String({ maxLength: 128 })),
        content: Type.String({ maxLength: 4 * 1024 * 1024 }),
        encoding: Type.Optional(Type.Union([Type.Literal('utf8'), Type.Literal('base64'), Type.Literal('hex')])),
      }),
      { minItems: 1, maxItems: 64, description: 'The first file is the program; the rest are written beside it.' },
    ),
    stdin: Type.Optional(Type.String({ maxLength: 4 * 1024 * 1024 })),
    args: Type.Optional(Type.Array(Type.String({ maxLength: 4096 }), { maxItems: 256 })),
    compile_timeout: Type.Optional(Type.Number()),
    run_timeout: Type.Optional(Type.Number()),
    compile_memory_limit: Type.Optional(Type.Number()),
    run_memory_limit: Type.Optional(Type.Number()),
  },
  { $id: 'PistonExecute', title: 'Piston execute request' },
);
export type PistonExecute = Static<typeof PistonExecuteSchema>;

const Measured = (description: string) => Type.Union([Type.Number({ minimum: 0 }), Type.Null()], { description: `${description} Null where the host does not count it.` });

export const PistonStageSchema = Type.Object({
  stdout: Type.String(),
  stderr: Type.String(),
  output: Type.String({ description: 'stdout then stderr (this runner keeps the two apart, so not interleaved).' }),
  code: Type.Union([Type.Integer(), Type.Null()]),
  signal: Type.Union([Type.String(), Type.Null()]),
  status: Type.Union([Type.Literal('TO'), Type.Literal('SG'), Type.Literal('RE'), Type.Null()], {
    description: 'As isolate says it: TO timed out, SG ended by a signal, RE a non-zero exit; null when it exited 0.',
  }),
  message: Type.Union([Type.String(), Type.Null()], { description: 'Why, in words (`Time limit exceeded`); null when it exited 0.' }),
  memory: Measured('Peak memory, bytes.'),
  cpu_time: Measured('CPU time, user and system, ms.'),
  wall_time: Measured('Wall time, ms.'),
});

export const PistonResultSchema = Type.Object(
  {
    language: Type.String(),
    version: Type.String(),
    run: PistonStageSchema,
    compile: Type.Optional(PistonStageSchema),
  },
  { $id: 'PistonResult', title: 'Piston execute result' },
);
export type PistonResult = Static<typeof PistonResultSchema>;

export const PistonErrorSchema = Type.Object({ message: Type.String() }, { $id: 'PistonError' });
