import type { PluginContext, PluginDefinition, PluginKind, PluginKindMap, PluginManifest } from '@bifro/spi';
import { registerPluginErrors } from '../base/errors';
import { findPlugin, type PluginDiscovery, type PluginPackage } from './plugin-discovery';
import { checkKindDeclared, checkSpiVersion, readManifest } from './plugin-manifest';
import { definitionOf, importPlugin } from './plugin-module';
import { createInstance } from './plugin-instance';

/** A plugin that passed resolve, manifest and version. */
export interface DescribedPlugin {
  readonly pkg: PluginPackage;
  readonly manifest: PluginManifest;
}

/** One kind of one plugin, created and initialised. */
export interface LoadedInstance<K extends PluginKind> extends DescribedPlugin {
  readonly kind: K;
  readonly instance: PluginKindMap[K];
}

export interface PluginLoaderOptions {
  readonly pluginsDir: string;
  readonly initTimeoutMs: number;
  /** Told of the codes a plugin declares that another loaded plugin declared first (those keep the first one's entry). */
  onErrorCodesTaken?(pkg: PluginPackage, codes: readonly string[]): void;
  /** The context handed to the factory of `kind`. */
  contextFor(pkg: PluginPackage, kind: PluginKind, options: Readonly<Record<string, unknown>>): PluginContext;
}

/**
 * Runs the load phases for plugins named in the config: resolve → manifest → version → import →
 * shape → instantiate → instanceShape → init. A plugin used for several kinds is imported once;
 * each failure is a coded error whose `details.phase` names the phase.
 */
export class PluginLoader {
  private readonly described = new Map<string, Promise<DescribedPlugin>>();
  private readonly definitions = new Map<string, Promise<PluginDefinition>>();

  constructor(
    private readonly discovery: PluginDiscovery,
    private readonly options: PluginLoaderOptions,
  ) {}

  /** Phases resolve, manifest and version. */
  describe(name: string): Promise<DescribedPlugin> {
    let described = this.described.get(name);
    if (described === undefined) {
      described = findPlugin(this.discovery, name, this.options.pluginsDir).then((pkg) => {
        const manifest = readManifest(pkg);
        checkSpiVersion(pkg, manifest);
        return { pkg, manifest };
      });
      this.described.set(name, described);
    }
    return described;
  }

  /** All phases for one kind of one plugin. */
  async load<K extends PluginKind>(name: string, kind: K, options: Readonly<Record<string, unknown>>): Promise<LoadedInstance<K>> {
    const { pkg, manifest } = await this.describe(name);
    checkKindDeclared(pkg, manifest, kind);
    const definition = await this.definitionOf({ pkg, manifest });
    const context = this.options.contextFor(pkg, kind, options);
    const instance = await createInstance(pkg, kind, definition, context, this.options.initTimeoutMs);
    return { pkg, manifest, kind, instance };
  }

  /** Phases import and shape, once per plugin; records the error codes the plugin declares (`errors`). */
  private definitionOf({ pkg, manifest }: DescribedPlugin): Promise<PluginDefinition> {
    let definition = this.definitions.get(pkg.name);
    if (definition === undefined) {
      definition = importPlugin(pkg, manifest).then((loaded) => {
        const shaped = definitionOf(pkg, manifest, loaded);
        if (shaped.errors !== undefined) {
          const taken = registerPluginErrors(pkg.name, shaped.errors);
          if (taken.length > 0) this.options.onErrorCodesTaken?.(pkg, taken);
        }
        return shaped;
      });
      this.definitions.set(pkg.name, definition);
    }
    return definition;
  }
}
