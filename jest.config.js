/** Jest runs the TypeScript sources directly (ts-jest, transpile only: `npm run lint` type-checks). */
/** Options both lanes share. */
const base = {
  testEnvironment: 'node',
  roots: ['<rootDir>/spi', '<rootDir>/core', '<rootDir>/plugins', '<rootDir>/test', '<rootDir>/archetype'],
  testMatch: ['**/test/**/*.test.ts'],
  testPathIgnorePatterns: ['/node_modules/', '<rootDir>/(spi|core|core/bench|plugins/[^/]+|archetype)/dist/', '/fixtures/'],
  transform: {
    '^.+\\.ts$': ['ts-jest', { tsconfig: '<rootDir>/tsconfig.test.json' }],
  },
  moduleNameMapper: {
    '^@bifro/spi$': '<rootDir>/spi/src/index.ts',
    '^@bifro/spi/testing$': '<rootDir>/spi/src/testing/index.ts',
    '^@bifro/core$': '<rootDir>/core/src/index.ts',
  },
};

/**
 * `npm test` runs three lanes side by side (test/run-lanes.js), each one file at a time, so that a
 * run takes about as long as its longest lane rather than the sum:
 *
 * - `cluster`: the suites that start NATS servers and broker clusters (mostly waiting on leases,
 *   heartbeats and faults), and the storage-nats and cluster/bench unit tests;
 * - `e2e`: the other end-to-end suites;
 * - `units`: the unit, plugin and CLI tests, and the single-node delivery checker (49), which
 *   balance the other two.
 *
 * The lanes share no port, data or server: every suite binds port 0 and starts its own NATS,
 * PostgreSQL or registry in a temp dir.
 */
const CLUSTER_FILES = [
  '<rootDir>/test/e2e/4[0-6]-*.test.ts',
  '<rootDir>/test/e2e/5[0-3]-*.test.ts',
  '<rootDir>/plugins/storage-nats/test/**/*.test.ts',
  '<rootDir>/core/test/bench/**/*.test.ts',
  '<rootDir>/core/test/cluster/**/*.test.ts',
];
/** The cluster lane's files as path regular expressions, for the other lanes to leave out. */
const CLUSTER_PATHS = [
  '<rootDir>/test/e2e/(4[0-6]|5[0-3])-[^/]*\\.test\\.ts$',
  '<rootDir>/plugins/storage-nats/test/',
  '<rootDir>/core/test/bench/',
  '<rootDir>/core/test/cluster/',
];
/** The end-to-end suite the units lane runs. */
const E2E_IN_UNITS = '49-';

/** @type {import('jest').Config} */
module.exports = {
  // A global option: jest reads it here, not in a project.
  testTimeout: 20000,
  // Adds one line per finished file with the count and the time so far (`default` prints failures and the summary).
  reporters: ['default', '<rootDir>/test/support/progress-reporter.js'],
  projects: [
    { ...base, displayName: 'cluster', testMatch: CLUSTER_FILES },
    {
      ...base,
      displayName: 'e2e',
      testMatch: ['<rootDir>/test/e2e/**/*.test.ts'],
      testPathIgnorePatterns: [...base.testPathIgnorePatterns, ...CLUSTER_PATHS, `<rootDir>/test/e2e/${E2E_IN_UNITS}`],
    },
    {
      ...base,
      displayName: 'units',
      testPathIgnorePatterns: [...base.testPathIgnorePatterns, ...CLUSTER_PATHS, `<rootDir>/test/e2e/(?!${E2E_IN_UNITS})`],
    },
  ],
};
