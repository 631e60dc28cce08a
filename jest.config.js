/** Jest runs the TypeScript sources directly (ts-jest, transpile only: `npm run lint` type-checks). */
/** @type {import('jest').Config} */
module.exports = {
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
  testTimeout: 20000,
};
