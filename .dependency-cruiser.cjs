// The one direction of imports (docs/architecture.md, "Layers"), checked by
// test/architecture/imports.test.ts and `npm run check:imports`.
// A module may import from its own layer and the layers below it, never above.
const LAYERS = [
  { name: 'base', path: '^src/(errors|ids|durations|event-loop|json-guard|yaml-document|terminal-text|package-root|counts|llm-models|llm-prices|canonical-json)\\.ts$' },
  { name: 'config', path: '^src/config/' },
  { name: 'model', path: '^src/model/' },
  { name: 'validation', path: '^src/validation/' },
  { name: 'dag', path: '^src/dag/' },
  { name: 'db', path: '^src/db/' },
  { name: 'observability', path: '^src/observability/' },
  // Tasks' git worktrees on this machine (git, folders, locks): the runtime and the maintenance loops use them.
  { name: 'workspaces', path: '^src/workspaces/' },
  { name: 'auth', path: '^src/auth/' },
  // Waiting for work: the node's one mechanism, on its LISTEN connection (the runtime, HTTP long polls, MCP).
  { name: 'claim-wait', path: '^src/claim-wait/' },
  // The engine, by who moves the task: an attempt's own steps at the bottom, then the DAG's shape,
  // waits, the read models and the operators' tools.
  { name: 'engine/attempt', path: '^src/engine/attempt/' },
  { name: 'engine/dag', path: '^src/engine/dag/' },
  { name: 'engine/waits', path: '^src/engine/waits/' },
  { name: 'engine/read', path: '^src/engine/read/' },
  { name: 'engine/ops', path: '^src/engine/ops/' },
  { name: 'webhooks and wire', path: '^src/(webhooks|wire)/' },
  { name: 'maintenance, runtime and mcp', path: '^src/(maintenance|runtime|mcp)/' },
  { name: 'http', path: '^src/http/' },
  // One process assembled: the loops, the LISTEN connection, the agents and the HTTP API (nodeStart).
  { name: 'node', path: '^src/node\\.ts$' },
  { name: 'cli', path: '^src/cli/' },
  { name: 'public API', path: '^src/index\\.ts$' },
  // The AI SDK made durable, streamed and budgeted (the package's dagent/ai-sdk): built on the public API, as a user's agent is.
  { name: 'ai-sdk', path: '^src/ai-sdk/' },
];

const upward = LAYERS.slice(0, -1).map((layer, i) => ({
  name: `no-upward-import-from-${layer.name.replaceAll(' ', '-')}`,
  comment: `${layer.name} may import only its own layer and those below it: ${LAYERS.slice(0, i + 1).map((l) => l.name).join(', ')}`,
  severity: 'error',
  from: { path: layer.path },
  to: { path: LAYERS.slice(i + 1).map((l) => l.path).join('|') },
}));

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'no import cycle between files',
      severity: 'error',
      from: { path: '^(src|agents)/' },
      to: { circular: true },
    },
    ...upward,
    {
      name: 'maintenance-and-runtime-apart',
      comment: 'the maintenance loops and the agent runtime both sit on the engine and never import each other',
      severity: 'error',
      from: { path: '^src/maintenance/' },
      to: { path: '^src/runtime/' },
    },
    {
      name: 'runtime-and-maintenance-apart',
      comment: 'the agent runtime and the maintenance loops both sit on the engine and never import each other',
      severity: 'error',
      from: { path: '^src/runtime/' },
      to: { path: '^src/maintenance/' },
    },
    {
      name: 'route-files-stand-alone',
      comment: 'a route file imports neither the server nor another route file (routes/index.ts lists them)',
      severity: 'error',
      from: { path: '^src/http/routes/', pathNot: '^src/http/routes/index\\.ts$' },
      to: { path: '^src/http/(server\\.ts|routes/)' },
    },
    {
      name: 'sql-only-in-db',
      comment: 'the SQL libraries are used in db/ (and model/, whose formulas have a SQL form) only',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/(db|model)/' },
      to: { path: 'node_modules/(drizzle-orm|pg)/' },
    },
    {
      name: 'agents-use-the-public-api',
      comment: 'the example agents import dagent as a user would: src/index.ts (dagent) and src/ai-sdk/index.ts (dagent/ai-sdk) only',
      severity: 'error',
      from: { path: '^agents/' },
      to: { path: '^src/', pathNot: '^src/(index|ai-sdk/index)\\.ts$' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^(test|dist)/' },
    tsConfig: { fileName: 'tsconfig.json' },
    tsPreCompilationDeps: true,
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default', 'types'] },
  },
};
