/**
 * The layers of src/, lowest first, and the rules that keep them (docs/architecture.md).
 * A file may import from its own folder and from a folder of a lower layer, never from a higher
 * one; folders on one layer do not import each other. With a strict order no two folders can
 * import each other, so there is no folder cycle; no-circular forbids file cycles inside a folder.
 */
const LAYERS = [
  ['util', 'contract'],
  ['observability'],
  ['db'],
  ['time'],
  ['store'],
  ['cluster', 'targets'],
  ['handlers'],
  ['lifecycle'],
  ['timers'],
  ['dispatch'],
  ['maintenance'],
  ['http'],
  ['app'],
];

const folder = (name) => `^src/${name}/`;
const layerRules = LAYERS.flatMap((folders, level) => {
  const higher = LAYERS.slice(level + 1).flat();
  return folders.flatMap((name) => {
    const rules = [];
    if (higher.length > 0)
      rules.push({
        name: `layer-${name}`,
        comment: `src/${name}/ is on layer ${level}: it may not import from a higher layer (${higher.join(', ')}).`,
        severity: 'error',
        from: { path: folder(name) },
        to: { path: `^src/(${higher.join('|')})/` },
      });
    const peers = folders.filter((other) => other !== name);
    if (peers.length > 0)
      rules.push({
        name: `layer-${name}-peers`,
        comment: `src/${name}/ does not import the folders on its own layer (${peers.join(', ')}).`,
        severity: 'error',
        from: { path: folder(name) },
        to: { path: `^src/(${peers.join('|')})/` },
      });
    return rules;
  });
});

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    ...layerRules,
    {
      name: 'no-circular',
      comment: 'No file cycles: a cycle makes the load order, and so the behaviour at start-up, depend on who imports first.',
      severity: 'error',
      from: { path: '^src/' },
      to: { circular: true },
    },
    {
      name: 'src-in-folders',
      comment: 'Every file of src/ lives in the folder of its concern.',
      severity: 'error',
      from: { path: '^src/[^/]+$' },
      to: {},
    },
    {
      name: 'contract-imports-only-typebox',
      comment: 'src/contract/ is published with the clients: it imports TypeBox and itself, nothing else.',
      severity: 'error',
      from: { path: '^src/contract/' },
      to: { pathNot: ['^src/contract/', '^node_modules/typebox/'] },
    },
    {
      name: 'src-not-to-tests-or-clients',
      comment: 'The server does not depend on its tests, its tools or its clients.',
      severity: 'error',
      from: { path: '^src/' },
      to: { path: '^(test|scripts|clients)/' },
    },
    {
      name: 'src-not-to-dev-dependencies',
      comment: 'The server runs with its dependencies alone; devDependencies are not installed in production.',
      severity: 'error',
      from: { path: '^src/' },
      to: { dependencyTypes: ['npm-dev'] },
    },
    {
      name: 'no-orphans',
      comment: 'A file nothing imports is dead code (entry points excepted).',
      severity: 'error',
      from: { orphan: true, path: '^src/', pathNot: ['^src/app/main\\.ts$', '\\.d\\.ts$', '^src/http/dashboard/'] },
      to: {},
    },
    {
      name: 'not-to-unresolvable',
      severity: 'error',
      from: {},
      to: { couldNotResolve: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: ['^src/http/dashboard/'] },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default', 'types'], mainFields: ['module', 'main', 'types', 'typings'] },
    reporterOptions: { text: { highlightFocused: true } },
  },
};
