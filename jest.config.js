/** Jest runs the TypeScript sources directly (ts-jest, transpile only: `npm run lint` type-checks). */
/** Packages published as ES modules only, reached by the admin API's dependencies (fastify inject's cookie). */
const ESM_ONLY = ['cookie'];

/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/spi', '<rootDir>/core', '<rootDir>/plugins', '<rootDir>/test', '<rootDir>/archetype'],
  testMatch: ['**/test/**/*.test.ts'],
  testPathIgnorePatterns: ['/node_modules/', '<rootDir>/(spi|core|core/bench|plugins/[^/]+|archetype)/dist/', '/fixtures/'],
  transform: {
    '^.+\\.ts$': ['ts-jest', { tsconfig: '<rootDir>/tsconfig.test.json' }],
    // ES-module-only dependencies, rewritten to CommonJS for Jest (test/support/esm-to-cjs.js).
    [`/node_modules/(${ESM_ONLY.join('|')})/.+\\.js$`]: '<rootDir>/test/support/esm-to-cjs.js',
  },
  transformIgnorePatterns: [`^(?!.*/node_modules/(${ESM_ONLY.join('|')})/).*/node_modules/`],
  moduleNameMapper: {
    '^@bifro/spi$': '<rootDir>/spi/src/index.ts',
    '^@bifro/spi/testing$': '<rootDir>/spi/src/testing/index.ts',
    '^@bifro/core$': '<rootDir>/core/src/index.ts',
  },
  testTimeout: 20000,
};
