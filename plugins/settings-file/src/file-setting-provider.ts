import { FileWatcher, serialized, settingChangeProblems } from '@bifro/spi';
import * as fs from 'node:fs';
import type { PluginLogger, SettingChange, SettingName, SettingProvider, SettingUpdate, SettingValue } from '@bifro/spi';
import type { FileSettingsOptions } from './options';
import { diffTables, EMPTY_TABLE, parseSettings, type SettingsTable } from './settings-table';
import { editSettingsText, writeFileAtomic } from './settings-writer';

/** How often an update starts over when the file changed under it (an editor saving meanwhile). */
const UPDATE_ATTEMPTS = 3;

/**
 * A {@link SettingProvider} over a YAML file of `defaults:` and `tenants:` overrides, checked
 * against the settings registry and reloaded when the file changes (see the README).
 *
 * `provide` is two map lookups: tenant override, then the `defaults` section, then `undefined`
 * (the registry default). Writable (SPI 1.3.0): `update` edits the file in place, keeping its
 * comments, and applies the change at once.
 */
export class FileSettingProvider implements SettingProvider {
  private table: SettingsTable = EMPTY_TABLE;
  /** The text last read (undefined: the file was missing), to skip reloads that change nothing. */
  private lastText: string | undefined;
  private readonly listeners = new Set<(change: SettingChange) => void>();
  private watcher: FileWatcher | undefined;
  /** One reload at a time; a change seen during one is read by the next. */
  private readonly reloads = serialized(
    () => this.exclusive(() => this.reloadOnce()),
    () => this.closed,
  );
  /** Reloads and updates take turns: a reload never applies a text older than an update's. */
  private turn: Promise<unknown> = Promise.resolve();
  private closed = false;

  constructor(
    private readonly options: FileSettingsOptions,
    private readonly logger: PluginLogger,
  ) {}

  /** The settings file, as an absolute path. */
  get file(): string {
    return this.options.file;
  }

  /** Reads the file and starts watching it. Rejects only when the file is missing and `missingOk` is false, or unreadable. */
  async init(): Promise<void> {
    const watcher = new FileWatcher({
      file: this.options.file,
      pollMs: this.options.pollMs,
      debounceMs: this.options.debounceMs,
      watch: this.options.watch,
      logger: this.logger,
      onChange: () => void this.reload(),
    });
    const text = await this.read();
    if (text === null) throw new Error(`settings-file: cannot read ${this.options.file}`);
    if (text === undefined) {
      if (!this.options.missingOk) throw new Error(`settings-file: ${this.options.file} does not exist (option missingOk is false)`);
      this.logger.info(`settings file ${this.options.file} not found: the registry defaults apply to every tenant until it is created`, {
        file: this.options.file,
      });
    } else {
      this.apply(text, false);
    }
    this.lastText = text;
    if (this.closed) return;
    this.watcher = watcher;
    watcher.start();
  }

  provide<S extends SettingName>(setting: S, tenantId: string): SettingValue<S> | undefined {
    const table = this.table;
    const value = table.tenants.get(tenantId)?.get(setting) ?? table.defaults.get(setting);
    return value as SettingValue<S> | undefined;
  }

  readOverrides(tenantId: string): Partial<Record<SettingName, SettingValue>> {
    const table = this.table;
    const out: Partial<Record<SettingName, SettingValue>> = {};
    for (const [setting, value] of table.defaults) out[setting] = value;
    for (const [setting, value] of table.tenants.get(tenantId) ?? []) out[setting] = value;
    return out;
  }

  /**
   * Changes the tenant's section of the file (a value sets an override, `null` removes it) and
   * applies it before resolving. The file is read again first, so an edit made by hand meanwhile
   * is kept, and replaced atomically; when it changes between that read and the rename, the update
   * starts over (a few times). Rejects, writing nothing, on an invalid value or a file it cannot
   * edit safely (a YAML error, a section that is not a mapping).
   */
  writeOverrides(tenantId: string, changes: SettingUpdate): Promise<void> {
    const problems = settingChangeProblems(changes);
    if (problems.length > 0) return Promise.reject(new Error(`settings-file: ${problems.join('; ')}`));
    return this.exclusive(() => this.updateOnce(tenantId, changes));
  }

  onChange(listener: (change: SettingChange) => void): () => void {
    const wrapped = (change: SettingChange): void => listener(change);
    this.listeners.add(wrapped);
    return () => {
      this.listeners.delete(wrapped);
    };
  }

  close(): void {
    this.closed = true;
    this.watcher?.close();
    this.watcher = undefined;
  }

  /** Reads the file again now (what a detected change does). Resolves when the new values apply. */
  reload(): Promise<void> {
    return this.reloads();
  }

  /** Runs `work` after the reloads and updates before it. */
  private exclusive<T>(work: () => Promise<T>): Promise<T> {
    const run = this.turn.then(work);
    this.turn = run.catch(() => undefined);
    return run;
  }

  private async updateOnce(tenantId: string, changes: SettingUpdate): Promise<void> {
    const file = this.options.file;
    for (let attempt = 1; ; attempt++) {
      if (this.closed) throw new Error('settings-file: the provider is closed');
      const before = await this.read();
      if (before === null) throw new Error(`settings-file: cannot read ${file}`);
      const text = editSettingsText(before, file, tenantId, changes);
      const written = await writeFileAtomic(file, text, async () => (await this.read()) === before);
      if (!written) {
        if (attempt < UPDATE_ATTEMPTS) continue;
        throw new Error(`settings-file: ${file} kept changing while it was being updated; try again`);
      }
      this.logger.info(`settings file ${file} updated for tenant ${tenantId}: ${Object.keys(changes).join(', ')}`, {
        file,
        tenantId,
        settings: Object.keys(changes),
      });
      // Applied here rather than by the watcher, which then finds the text it already has: one reload, not two.
      this.lastText = text;
      this.apply(text, true);
      return;
    }
  }

  private async reloadOnce(): Promise<void> {
    const text = await this.read();
    if (this.closed || text === null || text === this.lastText) return;
    this.lastText = text;
    if (text === undefined) {
      this.logger.warn(`settings file ${this.options.file} was removed: the registry defaults apply to every tenant until it is back`, {
        file: this.options.file,
      });
      this.replace(EMPTY_TABLE);
      return;
    }
    this.apply(text, true);
  }

  /** Parses `text` and applies it, logging its problems; a file that does not parse leaves everything as it was. */
  private apply(text: string, reload: boolean): void {
    const result = parseSettings(text, this.options.file, this.table);
    if (!result.ok) {
      this.logger.warn(result.warning.msg, result.warning.fields);
      return;
    }
    for (const w of result.warnings) this.logger.warn(w.msg, w.fields);
    if (!reload) {
      this.table = result.table;
      this.logger.info(
        `settings file ${this.options.file} loaded: ${result.table.defaults.size} default(s), ${result.table.tenants.size} tenant(s) with overrides`,
        { file: this.options.file, defaults: result.table.defaults.size, tenants: result.table.tenants.size },
      );
      return;
    }
    this.replace(result.table);
  }

  /** Installs a new table and tells listeners: once per changed tenant, once with `{}` when the defaults changed. */
  private replace(table: SettingsTable): void {
    const diff = diffTables(this.table, table);
    this.table = table;
    if (diff.tenants.length === 0 && !diff.defaults) {
      this.logger.debug(`settings file ${this.options.file} reloaded: no value changed`, { file: this.options.file });
      return;
    }
    this.logger.info(
      `settings file ${this.options.file} reloaded: ${diff.defaults ? 'defaults changed' : 'defaults unchanged'}` +
        `${diff.tenants.length > 0 ? `; changed tenants: ${diff.tenants.join(', ')}` : ''}`,
      { file: this.options.file, defaultsChanged: diff.defaults, tenants: diff.tenants },
    );
    for (const tenantId of diff.tenants) this.notify({ tenantId });
    if (diff.defaults) this.notify({});
  }

  private notify(change: SettingChange): void {
    for (const listener of [...this.listeners]) {
      try {
        listener(change);
      } catch (err) {
        this.logger.error('settings-file: a change listener threw', {
          tenantId: change.tenantId,
          err: err instanceof Error ? err.message : String(err),
        });
      }
    }
  }

  /** The file's text; undefined when it does not exist; null when it cannot be read (logged). */
  private async read(): Promise<string | undefined | null> {
    try {
      return await fs.promises.readFile(this.options.file, 'utf8');
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'ENOTDIR') return undefined;
      const message = err instanceof Error ? err.message : String(err);
      this.logger.warn(`settings file ${this.options.file} cannot be read (${message}); the previous settings stay`, {
        file: this.options.file,
        err: message,
      });
      return null;
    }
  }
}
