import { readFileSync } from 'node:fs';

/**
 * The versions of the tools a generated project develops with: those the Bifro repository
 * itself builds and tests with (its root package.json; a test keeps them equal).
 */
export const TOOLCHAIN = {
  '@types/jest': '^30.0.0',
  '@types/node': '^20.19.43',
  jest: '^30.5.2',
  'ts-jest': '^29.4.15',
  typescript: '^5.9.3',
} as const;

/**
 * The version of the `@bifro/spi` package create-bifro-plugin depends on (so a new release of
 * the generator tracks the SPI). The generated plugin declares `^<this version>`.
 */
export function spiVersion(): string {
  const file = require.resolve('@bifro/spi/package.json');
  const pkg = JSON.parse(readFileSync(file, 'utf8')) as { version?: unknown };
  if (typeof pkg.version !== 'string' || !/^\d+\.\d+\.\d+/.test(pkg.version)) {
    throw new Error(`${file} has no valid version`);
  }
  return pkg.version;
}

/** The version of create-bifro-plugin itself. */
export function ownVersion(): string {
  const pkg = JSON.parse(readFileSync(require.resolve('../package.json'), 'utf8')) as { version: string };
  return pkg.version;
}
