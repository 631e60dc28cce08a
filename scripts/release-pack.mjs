#!/usr/bin/env node
/**
 * `npm run release:pack [-- --out <dir>] [-- --no-build]`: checks every publishable package of
 * this repository and packs each into a tarball, ready for `npm publish <tarball>`.
 *
 * Publishable: every workspace (root package.json `workspaces`) that is not `private`: `@bifro/spi`,
 * the first-party plugins, `@bifro/core` (with the `bifro` bin) and `create-bifro-plugin`.
 *
 * Checks, all reported together (exit 1, nothing packed, when one fails):
 *   - a semver `version`, a `license`, a `files` list that ships CHANGELOG.md;
 *   - CHANGELOG.md with a `## <version>` section for that version: a release says what changed;
 *   - a scoped package publishes as public (`publishConfig.access`): npm's default for a scoped
 *     package is restricted, and the first `npm publish` would fail without a paid scope;
 *   - no `file:`, `link:`, `workspace:` or path dependency: a registry cannot resolve them;
 *   - a dependency on another package of this repository accepts the version packed with it
 *     (`@bifro/core` pins `@bifro/spi`; a plugin's peer range accepts the SPI);
 *   - after the build: `main` and every `bin` target exist.
 * Then `npm pack` of each (scripts ignored: the build ran first), into `release/` by default,
 * with `release/packages.json` listing the tarballs in publish order (dependencies first).
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import process from 'node:process';
import { fileURLToPath } from 'node:url';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const semver = createRequire(path.join(REPO, 'package.json'))('semver');

const USAGE = `Usage: npm run release:pack [-- --out <dir>] [-- --no-build] [-- --check] [-- --root <dir>]

Checks versions, changelogs and manifests of every publishable package, builds (tsc -b),
and packs each into <dir> (default: release/), with <dir>/packages.json in publish order.
  --out <dir>   where the tarballs go (emptied of .tgz files first)
  --no-build    do not run npm run build (dist/ must be there)
  --check       only check, pack nothing
  --root <dir>  the repository to release (default: this one)
`;

/** The command line: `{ out, build, check }`, or exits 2 on a usage error. */
function parseArgs(argv) {
  const opts = { root: REPO, out: undefined, build: true, check: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--root' && argv[i + 1] !== undefined) opts.root = path.resolve(argv[++i]);
    else if (arg === '--out' && argv[i + 1] !== undefined) opts.out = path.resolve(argv[++i]);
    else if (arg.startsWith('--out=')) opts.out = path.resolve(arg.slice('--out='.length));
    else if (arg === '--no-build') opts.build = false;
    else if (arg === '--check') opts.check = true;
    else if (arg === '--help' || arg === '-h') {
      process.stdout.write(USAGE);
      process.exit(0);
    } else {
      process.stderr.write(`release:pack: unknown argument ${JSON.stringify(arg)}\n${USAGE}`);
      process.exit(2);
    }
  }
  return { ...opts, out: opts.out ?? path.join(opts.root, 'release') };
}

const OPTIONS = parseArgs(process.argv.slice(2));
/** The repository released: its root package.json lists the workspaces. */
const ROOT = OPTIONS.root;

const readJson = (file) => JSON.parse(readFileSync(file, 'utf8'));

/** The workspace folders of the root package.json (`dir` and `dir/*` patterns), sorted. */
function workspaceDirs() {
  const dirs = [];
  for (const pattern of readJson(path.join(ROOT, 'package.json')).workspaces ?? []) {
    if (pattern.endsWith('/*')) {
      const parent = path.join(ROOT, pattern.slice(0, -2));
      for (const entry of readdirSync(parent, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name)))
        if (entry.isDirectory() && existsSync(path.join(parent, entry.name, 'package.json'))) dirs.push(path.join(parent, entry.name));
    } else {
      dirs.push(path.join(ROOT, pattern));
    }
  }
  return dirs;
}

/** The publishable packages: `{ dir, pkg }` of each workspace that is not private. */
function publishablePackages() {
  return workspaceDirs()
    .map((dir) => ({ dir, pkg: readJson(path.join(dir, 'package.json')) }))
    .filter(({ pkg }) => pkg.private !== true);
}

const DEPENDENCY_FIELDS = ['dependencies', 'peerDependencies', 'optionalDependencies'];

/** The problems of one package before the build (manifest, changelog, dependencies), as lines. */
function manifestProblems({ dir, pkg }, versions) {
  const where = `${path.relative(ROOT, dir)} (${pkg.name})`;
  const problems = [];
  if (semver.valid(pkg.version) === null) problems.push(`${where}: version ${JSON.stringify(pkg.version)} is not semver`);
  if (typeof pkg.license !== 'string') problems.push(`${where}: no license`);
  if (!Array.isArray(pkg.files)) problems.push(`${where}: no "files" list (npm would pack the whole folder, tests and sources)`);
  else if (!pkg.files.includes('CHANGELOG.md')) problems.push(`${where}: "files" does not ship CHANGELOG.md`);
  if (pkg.name.startsWith('@') && pkg.publishConfig?.access !== 'public')
    problems.push(`${where}: scoped, needs "publishConfig": { "access": "public" } (npm publishes a scoped package as restricted)`);
  const changelog = path.join(dir, 'CHANGELOG.md');
  if (!existsSync(changelog)) problems.push(`${where}: no CHANGELOG.md`);
  else if (!new RegExp(`^## \\[?${pkg.version.replace(/\./g, '\\.')}\\]?(\\s|$)`, 'm').test(readFileSync(changelog, 'utf8')))
    problems.push(`${where}: CHANGELOG.md has no "## ${pkg.version}" section`);
  for (const field of DEPENDENCY_FIELDS) {
    for (const [name, spec] of Object.entries(pkg[field] ?? {})) {
      if (/^(file|link|workspace|portal):|^\.{0,2}\//.test(spec)) {
        problems.push(`${where}: ${field}.${name} is ${JSON.stringify(spec)}, which a registry cannot resolve`);
        continue;
      }
      const own = versions.get(name);
      if (own !== undefined && !semver.satisfies(own, spec))
        problems.push(`${where}: ${field}.${name} is ${JSON.stringify(spec)}, but this release packs ${name}@${own}`);
    }
  }
  return problems;
}

/** The problems found once built: files the manifest points at that are missing. */
function builtProblems({ dir, pkg }) {
  const where = `${path.relative(ROOT, dir)} (${pkg.name})`;
  const problems = [];
  const bins = typeof pkg.bin === 'string' ? { [pkg.name]: pkg.bin } : (pkg.bin ?? {});
  for (const [file, what] of [[pkg.main, 'main'], ...Object.entries(bins).map(([name, target]) => [target, `bin ${name}`])]) {
    if (typeof file === 'string' && !existsSync(path.join(dir, file)))
      problems.push(`${where}: ${what} ${file} does not exist (build first)`);
  }
  return problems;
}

/**
 * Publish order: a package after the packages of this release it depends on (dependencies and
 * peers), so that a registry never holds a package whose dependency is not there yet.
 */
function publishOrder(packages) {
  const byName = new Map(packages.map((p) => [p.pkg.name, p]));
  const ordered = [];
  const seen = new Set();
  const visit = (p) => {
    if (seen.has(p.pkg.name)) return;
    seen.add(p.pkg.name);
    for (const field of DEPENDENCY_FIELDS)
      for (const name of Object.keys(p.pkg[field] ?? {})) if (byName.has(name)) visit(byName.get(name));
    ordered.push(p);
  };
  for (const p of packages) visit(p);
  return ordered;
}

/** Runs a command; resolves `{ code, stdout, stderr }`. */
function run(command, args, cwd) {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'], shell: process.platform === 'win32' });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? 1, stdout, stderr }));
  });
}

/** `npm pack` of one package into `out`; resolves what npm reports (filename, integrity, files). */
async function pack({ dir, pkg }, out) {
  const result = await run('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', out], dir);
  if (result.code !== 0) throw new Error(`npm pack of ${pkg.name} failed (${result.code}):\n${result.stderr}${result.stdout}`);
  const [report] = JSON.parse(result.stdout);
  return { name: pkg.name, version: pkg.version, file: report.filename, integrity: report.integrity, files: report.files.length };
}

/** Runs `tasks` (functions returning promises) two at a time: npm pack is mostly process start-up. */
async function inPairs(tasks) {
  const results = new Array(tasks.length);
  let next = 0;
  const worker = async () => {
    while (next < tasks.length) {
      const i = next++;
      results[i] = await tasks[i]();
    }
  };
  await Promise.all([worker(), worker()]);
  return results;
}

async function main() {
  const opts = OPTIONS;
  const packages = publishablePackages();
  const versions = new Map(packages.map(({ pkg }) => [pkg.name, pkg.version]));
  const fail = (problems) => {
    process.stderr.write(`release:pack: ${problems.length} problem(s), nothing packed:\n${problems.map((p) => `  - ${p}`).join('\n')}\n`);
    process.exit(1);
  };
  const problems = packages.flatMap((p) => manifestProblems(p, versions));
  if (problems.length > 0) fail(problems);

  if (opts.build) {
    process.stdout.write('building (npm run build) ...\n');
    const built = await run('npm', ['run', 'build'], ROOT);
    if (built.code !== 0) fail([`npm run build failed (${built.code}):\n${built.stdout}${built.stderr}`]);
  }
  const missing = packages.flatMap(builtProblems);
  if (missing.length > 0) fail(missing);
  process.stdout.write(`checked ${packages.length} packages: versions, changelogs, manifests, dependencies\n`);
  if (opts.check) return;

  mkdirSync(opts.out, { recursive: true });
  for (const file of readdirSync(opts.out)) if (file.endsWith('.tgz')) rmSync(path.join(opts.out, file));
  const ordered = publishOrder(packages);
  const packed = await inPairs(ordered.map((p) => () => pack(p, opts.out)));
  writeFileSync(path.join(opts.out, 'packages.json'), `${JSON.stringify(packed, null, 2)}\n`);
  const rel = path.relative(process.cwd(), opts.out) || '.';
  process.stdout.write(`packed ${packed.length} packages into ${opts.out}; publish them in this order (packages.json lists it):\n`);
  for (const p of packed) process.stdout.write(`  npm publish ${path.join(rel, p.file)}\n`);
}

main().catch((err) => {
  process.stderr.write(`release:pack: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
