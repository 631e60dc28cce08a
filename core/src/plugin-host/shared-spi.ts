import Module, { register } from 'node:module';
import { pathToFileURL } from 'node:url';

/**
 * One `@bifro/spi` per process: whatever a plugin bundled or failed to install, `require` and
 * `import` of `@bifro/spi` (and its subpaths, `@bifro/spi/testing`) from any module resolve to the
 * copy the broker itself runs. A plugin takes the SPI as a peer dependency (docs/plugin-authoring.md),
 * so a plugin folder usually has none of its own; and a bundled copy would give the plugin other
 * classes and constants than the broker's (`BifroError`, `SPI_VERSION`). Installed once, before the
 * first plugin is imported; idempotent.
 *
 * CommonJS goes through `Module._resolveFilename` (the hook every CommonJS resolution passes),
 * ES modules through a resolve hook registered with `module.register` (Node >= 20.6).
 */

const SPI = '@bifro/spi';

type ResolveFilename = (request: string, parent: unknown, isMain: boolean, options?: unknown) => string;

let installed = false;

/** Whether a module specifier names the SPI package or one of its subpaths. */
export function isSpiSpecifier(specifier: string): boolean {
  return specifier === SPI || specifier.startsWith(SPI + '/');
}

/** The file the broker's own `@bifro/spi` resolves a specifier to (the package's `exports` apply). */
function brokerSpiFile(specifier: string): string {
  return require.resolve(specifier);
}

export function shareBrokerSpi(): void {
  if (installed) return;
  installed = true;
  // The ES module hook runs on the loader thread: it gets the map of every SPI entry point up front.
  const entries: Record<string, string> = {};
  for (const specifier of [SPI, `${SPI}/testing`, `${SPI}/package.json`]) {
    try {
      entries[specifier] = pathToFileURL(brokerSpiFile(specifier)).href;
    } catch {
      // An entry point this SPI version does not have: left to the normal resolution (and its error).
    }
  }
  const cjs = Module as unknown as { _resolveFilename: ResolveFilename };
  const original = cjs._resolveFilename;
  const resolved = new Map<string, string>();
  // Resolved as if this module (the broker's core) asked: the broker's copy, its `exports` applied.
  const self = module;
  cjs._resolveFilename = function resolveFilename(this: unknown, request, parent, isMain, options) {
    if (!isSpiSpecifier(request)) return original.call(this, request, parent, isMain, options);
    let file = resolved.get(request);
    if (file === undefined) {
      file = original.call(this, request, self, false);
      resolved.set(request, file);
    }
    return file;
  };
  const hook = `let entries = {};
export function initialize(data) { entries = data; }
export async function resolve(specifier, context, next) {
  const url = entries[specifier];
  return url === undefined ? next(specifier, context) : { url, shortCircuit: true };
}`;
  try {
    register('data:text/javascript,' + encodeURIComponent(hook), { data: entries });
  } catch {
    // A sandbox that resolves modules itself (Jest refuses loader hooks and maps @bifro/spi with
    // its moduleNameMapper): its own resolution applies.
  }
}
