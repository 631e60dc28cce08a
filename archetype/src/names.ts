import path from 'node:path';

/**
 * npm's rules for a new package name (those of `validate-npm-package-name`): at most 214
 * characters, lower case, URL-safe, an optional `@scope/`, not starting with `.` or `_`.
 */
const PACKAGE_NAME = /^(?:@[a-z0-9-*~][a-z0-9-*._~]*\/)?[a-z0-9-~][a-z0-9-._~]*$/;

const RESERVED_NAMES = new Set(['node_modules', 'favicon.ico']);

/** Why `name` cannot be an npm package name, or undefined when it can. */
export function packageNameProblem(name: string): string | undefined {
  if (name.length === 0) return 'a package name must not be empty';
  if (name.length > 214) return 'a package name must not be longer than 214 characters';
  if (name.trim() !== name) return 'a package name must not start or end with spaces';
  if (name.toLowerCase() !== name) return 'a package name must be lower case';
  if (RESERVED_NAMES.has(name)) return `${name} is a reserved name`;
  if (/^[._]/.test(name)) return 'a package name must not start with . or _';
  if (!PACKAGE_NAME.test(name)) {
    return 'a package name may hold only lower-case letters, digits and - . _ ~, with an optional @scope/ (e.g. @acme/bifro-auth-ldap)';
  }
  return undefined;
}

/**
 * The package name proposed for a target directory: its folder name made npm-safe, prefixed
 * with `bifro-plugin-` unless it already names Bifro (`my-auth` → `bifro-plugin-my-auth`,
 * `bifro-auth-ldap` stays).
 */
export function defaultPackageName(dir: string): string {
  const base =
    path
      .basename(path.resolve(dir))
      .toLowerCase()
      .replace(/[^a-z0-9._~-]+/g, '-')
      .replace(/-{2,}/g, '-')
      .replace(/^[-._~]+|[-._~]+$/g, '') || 'plugin';
  return /^bifro[-_.]/.test(base) ? base : `bifro-plugin-${base}`;
}

/**
 * The prefix of the error codes the generated plugin declares: its scope and name in upper case,
 * without a leading `bifro-plugin-`/`bifro-` (codes starting with `BIFRO_` are the broker's),
 * e.g. `@acme/bifro-auth-ldap` → `ACME_AUTH_LDAP`, `bifro-plugin-my-auth` → `MY_AUTH`.
 */
export function errorCodePrefix(name: string): string {
  const [scope, base] = name.startsWith('@') ? name.slice(1).split('/', 2) : ['', name];
  const parts = [scope === 'bifro' ? '' : scope, (base ?? '').replace(/^bifro[-_.](?:plugin[-_.])?/, '')];
  let prefix = parts
    .join('_')
    .toUpperCase()
    .replace(/[^A-Z0-9]+/g, '_')
    .replace(/^_+|_+$/g, '');
  while (prefix.startsWith('BIFRO_')) prefix = prefix.slice('BIFRO_'.length);
  if (prefix === '' || prefix === 'BIFRO') prefix = 'PLUGIN';
  if (/^[0-9]/.test(prefix)) prefix = `P${prefix}`;
  return prefix;
}
