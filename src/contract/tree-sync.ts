import { Type, type Static } from '@sinclair/typebox';

/**
 * Bulk sync: a directory tree moved into or out of a sandbox (or a volume) as one tar stream,
 * each entry judged on its way, within budgets. The query of both directions and what a sync
 * says it did.
 */

/** A sync's longest timeout: a day (a timer of node's holds no more than about 24 days). */
export const MAX_SYNC_TIMEOUT_SECONDS = 86_400;

const Globs = Type.Optional(
  Type.Union([Type.String({ maxLength: 1024 }), Type.Array(Type.String({ maxLength: 1024 }), { maxItems: 256 })], {
    description: 'Glob patterns (picomatch) on paths relative to the synced directory, repeatable.',
  }),
);

export const SyncQuerySchema = Type.Object(
  {
    path: Type.String({ minLength: 1, maxLength: 4096, description: 'The directory in the sandbox (absolute, or relative to /home/user); made when a sync in finds none.' }),
    include: Globs,
    exclude: Globs,
    max_bytes: Type.Optional(Type.Integer({ minimum: 0, description: 'Bytes of file content moved at most (default: the sandbox’s largest file times its files cap).' })),
    max_files: Type.Optional(Type.Integer({ minimum: 0, description: 'Entries (files, directories, links) moved at most (default 100,000).' })),
    timeout: Type.Optional(Type.Number({ exclusiveMinimum: 0, maximum: MAX_SYNC_TIMEOUT_SECONDS, description: 'Seconds the transfer may take (default 600, at most a day).' })),
    compress: Type.Optional(Type.Literal('gzip', { description: 'A sync out: the tar stream gzipped. A sync in says its own with Content-Encoding: gzip.' })),
  },
  { additionalProperties: false },
);
export type SyncQuery = Static<typeof SyncQuerySchema>;

export const SyncBudgetSchema = Type.Union([Type.Literal('max_bytes'), Type.Literal('max_files'), Type.Literal('timeout')]);
export type SyncBudget = Static<typeof SyncBudgetSchema>;

export const SyncReportSchema = Type.Object(
  {
    complete: Type.Boolean({ description: 'Every entry was judged and every one taken arrived whole.' }),
    stopped: Type.Optional(
      Type.Object(
        { budget: SyncBudgetSchema, limit: Type.Number() },
        { description: 'The budget the transfer reached: it stopped there, between two entries; what arrived before is in place, nothing half-written.' },
      ),
    ),
    files: Type.Integer({ minimum: 0 }),
    directories: Type.Integer({ minimum: 0 }),
    links: Type.Integer({ minimum: 0 }),
    bytes: Type.Integer({ minimum: 0, description: 'File content moved.' }),
    skipped: Type.Integer({ minimum: 0, description: 'Entries left out by include and exclude.' }),
    refused: Type.Array(Type.Object({ path: Type.String(), reason: Type.String() }), {
      maxItems: 100,
      description: 'Entries refused (an absolute path, one leading out with .., a link out, a device): the first 100.',
    }),
    refused_count: Type.Integer({ minimum: 0 }),
    errors: Type.Optional(Type.String({ description: 'What tar in the sandbox said when it failed (a full disk, a file it may not write).' })),
  },
  { $id: 'SyncReport', additionalProperties: false, title: 'What a sync moved' },
);
export type SyncReport = Static<typeof SyncReportSchema>;
