/**
 * The architecture, enforced (`npm run lint`): no import cycle anywhere, and folders import
 * only layers below their own. Faces call the core, the core calls its parts, never upward.
 */
const LAYERS = [
  ['util', 'wire', 'compress'],
  ['contract'],
  ['client'],
  ['config'],
  ['workspace'],
  ['egress'],
  ['images'],
  ['isolation'],
  ['languages', 'policy'],
  ['runner'],
  ['templates'],
  ['volumes'],
  ['tasks', 'sessions', 'sandboxes', 'envd', 'interpreter'],
  ['queue', 'store'],
  ['jobs'],
  ['postgres'],
  ['http', 'guest', 'agent-exec', 'mcp'],
  ['composition'],
  ['cli'],
];

const folders = (layers) => `^src/(${layers.flat().join('|')})/`;

module.exports = {
  forbidden: [
    {
      name: 'no-cycles',
      severity: 'error',
      comment: 'An import cycle welds modules together: split the shared part out into a lower layer.',
      from: {},
      to: { circular: true },
    },
    ...LAYERS.slice(0, -1).map((layer, index) => ({
      name: `layer-${layer.join('-')}`,
      severity: 'error',
      comment: `${layer.join(', ')} may not import a layer above it (${LAYERS.slice(index + 1)
        .flat()
        .join(', ')}).`,
      from: { path: folders([layer]) },
      to: { path: folders(LAYERS.slice(index + 1)) },
    })),
    {
      name: 'http-is-fastify-only',
      severity: 'error',
      comment: 'http/ serves routes over the ports it is handed; which queue, store and workers stand behind them (embedded or PostgreSQL) is for composition/ to assemble.',
      from: { path: '^src/http/' },
      to: { path: '^src/postgres/' },
    },
    {
      name: 'no-unlisted-folder',
      severity: 'error',
      comment: 'Every folder of src/ has a place in LAYERS.',
      from: { path: '^src/[^/]+/', pathNot: folders(LAYERS) },
      to: {},
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
  },
};
