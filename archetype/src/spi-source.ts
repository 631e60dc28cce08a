import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, realpathSync } from 'node:fs';
import path from 'node:path';
import { CliError, EXIT } from './cli-error';

/**
 * Where a generated project gets `@bifro/spi` to develop against (its devDependency; the peer
 * range and `bifro.spi` are always `^<version>`).
 *
 * - `registry`: the generator was installed from a registry (`npm create bifro-plugin`), so the
 *   SPI is there too: the devDependency is the semver range.
 * - `vendored`: the generator runs from a clone of the Bifro repository, whose `@bifro/spi` is a
 *   workspace folder that no registry may hold (nothing of Bifro is published yet). The SPI is
 *   packed into the project (`vendor/bifro-spi-<version>.tgz`) and the devDependency names that
 *   file, so `npm install` in the project needs no registry for it. The packed plugin carries the
 *   `file:` devDependency in its manifest, which nothing reads: `bifro plugin install` and npm
 *   never install a dependency's devDependencies.
 */
export type SpiDependency =
  | { readonly from: 'registry'; readonly spec: string }
  | {
      readonly from: 'vendored';
      readonly spec: string;
      /** The tarball, relative to the project (`/`-separated). */
      readonly tarball: string;
      /** The `@bifro/spi` folder packed into it. */
      readonly sourceDir: string;
    };

/** The project folder the SPI tarball is written to. */
export const VENDOR_DIR = 'vendor';

/** The folder of the `@bifro/spi` package this generator runs with. */
export function spiDir(): string {
  return path.dirname(require.resolve('@bifro/spi/package.json'));
}

/**
 * Whether a package folder is a source checkout (a workspace of a clone, or a linked folder)
 * rather than an installed package: an installed one always lives under a `node_modules`.
 */
export function isSourceCheckout(dir: string): boolean {
  return !realpathSync(dir).split(path.sep).includes('node_modules');
}

/** The file `npm pack` writes for `@bifro/spi` at `version`. */
export function spiTarballName(version: string): string {
  return `bifro-spi-${version}.tgz`;
}

/** How a project generated now depends on the SPI of `version` found in `dir`. */
export function spiDependency(version: string, dir: string = spiDir()): SpiDependency {
  if (!isSourceCheckout(dir)) return { from: 'registry', spec: `^${version}` };
  const tarball = `${VENDOR_DIR}/${spiTarballName(version)}`;
  return { from: 'vendored', spec: `file:${tarball}`, tarball, sourceDir: dir };
}

/** Throws (exit 1) when the SPI checkout is not built: checked before any file of the project is written. */
export function checkVendorable(dep: SpiDependency): void {
  if (dep.from !== 'vendored' || existsSync(path.join(dep.sourceDir, 'dist', 'index.js'))) return;
  throw new CliError(
    `${dep.sourceDir} is not built (no dist/index.js), so it cannot be packed into the project: run npm install && npm run build in the Bifro repository first`,
    EXIT.FAILED,
  );
}

/**
 * Packs the SPI of a source checkout into `<project>/vendor/` with the user's npm, as npm would
 * publish it (its `files`: dist/). Refuses an unbuilt checkout, whose tarball would hold no code.
 */
export async function vendorSpi(dep: Extract<SpiDependency, { from: 'vendored' }>, project: string, env: NodeJS.ProcessEnv): Promise<void> {
  checkVendorable(dep);
  const destination = path.join(project, VENDOR_DIR);
  mkdirSync(destination, { recursive: true });
  const { code, output } = await runNpm(['pack', '--ignore-scripts', '--pack-destination', destination], dep.sourceDir, npmEnv(env));
  if (code !== 0 || !existsSync(path.join(project, dep.tarball))) {
    throw new CliError(`npm pack of ${dep.sourceDir} into ${destination} failed (exit ${code}):\n${output.trim()}`, EXIT.FAILED);
  }
}

/**
 * The environment for npm: without the `npm_config_*` values npm create forwarded from the
 * generator's own options (npm would warn about them as unknown settings, or take `--yes`,
 * `--force` for its own).
 */
function npmEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {};
  const forwarded = new Set(['npm_config_kind', 'npm_config_name', 'npm_config_description', 'npm_config_yes', 'npm_config_force']);
  for (const [key, value] of Object.entries(env)) if (!forwarded.has(key.toLowerCase())) out[key] = value;
  return out;
}

/**
 * Runs npm: the npm that runs this generator when there is one (`npm_execpath`, under npm create
 * or npx), else the `npm` of the PATH.
 */
function runNpm(args: readonly string[], cwd: string, env: NodeJS.ProcessEnv): Promise<{ code: number; output: string }> {
  const cli = env.npm_execpath;
  const [command, argv] =
    cli !== undefined && /\.[cm]?js$/.test(cli)
      ? [process.execPath, [cli, ...args]]
      : [process.platform === 'win32' ? 'npm.cmd' : 'npm', [...args]];
  return new Promise((resolve) => {
    const child = spawn(command, argv, {
      cwd,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
      shell: process.platform === 'win32' && command === 'npm.cmd',
    });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    child.on('error', (err) => resolve({ code: 1, output: `${output}${err.message}` }));
    child.on('close', (code) => resolve({ code: code ?? 1, output }));
  });
}
