import { pathToFileURL } from 'node:url';
import * as vm from 'node:vm';
import type * as Jose from 'jose' with { 'resolution-mode': 'import' };
import { JwtPluginError } from './errors';

/** The `jose` module (an ES module). */
export type JoseModule = typeof Jose;

/** A real dynamic import, kept out of reach of the TypeScript CommonJS transform (which would turn it into require). */
const dynamicImport = new Function('specifier', 'return import(specifier)') as (specifier: string) => Promise<unknown>;

let loading: Promise<JoseModule> | undefined;

/**
 * Loads `jose` once per process. `jose` is an ES module and this plugin is CommonJS, so it is
 * imported dynamically, resolved from the plugin's folder (its own `node_modules`, then up).
 *
 * A host that runs the plugin inside a `vm` context without an ES module loader (Jest's module
 * registry does: `import()` there fails with ERR_VM_DYNAMIC_IMPORT_CALLBACK_MISSING_FLAG) gets
 * the module from Node's own loader instead, through a script compiled with
 * `vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER` (Node >= 20.12). jose's objects then come from
 * the main context: errors are told apart by their `code`, never with `instanceof Error`.
 */
export function loadJose(): Promise<JoseModule> {
  loading ??= load().catch((err: unknown) => {
    loading = undefined;
    throw err;
  });
  return loading;
}

async function load(): Promise<JoseModule> {
  let url: string;
  try {
    url = pathToFileURL(require.resolve('jose')).href;
  } catch (err) {
    throw new JwtPluginError('BIFRO_AUTH_JWT_JOSE_MISSING', `cannot find the jose library (${messageOf(err)})`, { cause: err });
  }
  try {
    return (await dynamicImport(url)) as JoseModule;
  } catch (err) {
    if (!isMissingVmLoader(err)) {
      throw new JwtPluginError('BIFRO_AUTH_JWT_JOSE_MISSING', `cannot load the jose library from ${url} (${messageOf(err)})`, {
        cause: err,
      });
    }
  }
  const mainLoader = (vm.constants as Partial<typeof vm.constants> | undefined)?.USE_MAIN_CONTEXT_DEFAULT_LOADER;
  if (mainLoader === undefined) {
    throw new JwtPluginError(
      'BIFRO_AUTH_JWT_JOSE_MISSING',
      'cannot load the jose library: this host has no ES module loader (needs Node.js 20.12 or later)',
    );
  }
  try {
    const script = new vm.Script('(specifier) => import(specifier)', {
      filename: __filename,
      importModuleDynamically: mainLoader,
    });
    const importer = script.runInThisContext() as (specifier: string) => Promise<unknown>;
    return (await importer(url)) as JoseModule;
  } catch (err) {
    throw new JwtPluginError('BIFRO_AUTH_JWT_JOSE_MISSING', `cannot load the jose library from ${url} (${messageOf(err)})`, { cause: err });
  }
}

function isMissingVmLoader(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && code.startsWith('ERR_VM_DYNAMIC_IMPORT_CALLBACK_MISSING');
}

/** The message of anything thrown (jose's errors may come from another context: no instanceof). */
export function messageOf(err: unknown): string {
  const message = (err as { message?: unknown } | null)?.message;
  return typeof message === 'string' ? message : String(err);
}

/** The `code` of anything thrown, or undefined. */
export function codeOf(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}
