import { FileWatcher, serialized } from '@bifro/spi';
import * as fs from 'node:fs';
import type { AccessAction, AccessControl, AccessDecision, ClientInfo, PluginLogger } from '@bifro/spi';
import { EMPTY_RULE_SET, parseAclFile, scopesFor, type CompiledScope, type RuleSet } from './acl-file-format';
import { AclFileError, PLUGIN_NAME } from './errors';
import type { AclFileOptions } from './options';

type Answer = 'granted' | 'denied' | 'defer';

/** The scopes resolved for one client object, valid while the rule set is the same. */
interface Resolved {
  readonly ruleSet: RuleSet;
  readonly scopes: readonly CompiledScope[];
}

/**
 * An {@link AccessControl} over an ACL file (format in the README), compiled into one matcher per
 * scope and reloaded when the file changes. `checkPermission` is synchronous: the scopes of a
 * client are resolved once per connection (cached on the `ClientInfo` object, per rule set), then
 * each scope's compiled rules answer from memory.
 */
export class FileAccessControl implements AccessControl {
  private ruleSet: RuleSet = EMPTY_RULE_SET;
  private lastText: string | undefined;
  private readonly resolved = new WeakMap<ClientInfo, Resolved>();
  private watcher: FileWatcher | undefined;
  /** One reload at a time; a change seen during one is read by the next. */
  private readonly reloads = serialized(
    () => this.reloadOnce(),
    () => this.closed,
  );
  private closed = false;
  private readonly otherwise: Answer;

  constructor(
    private readonly options: AclFileOptions,
    private readonly logger: PluginLogger,
  ) {
    this.otherwise = options.otherwise === 'grant' ? 'granted' : options.otherwise === 'deny' ? 'denied' : 'defer';
  }

  /** The ACL file, as an absolute path. */
  get file(): string {
    return this.options.file;
  }

  /** The rules in force. */
  get rules(): RuleSet {
    return this.ruleSet;
  }

  /** Reads and compiles the file, then watches it. Throws `BIFRO_ACL_FILE_UNREADABLE` or `BIFRO_ACL_FILE_INVALID`. */
  async init(): Promise<void> {
    const file = this.options.file;
    let text: string;
    try {
      text = await fs.promises.readFile(file, 'utf8');
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      throw new AclFileError('BIFRO_ACL_FILE_UNREADABLE', `${PLUGIN_NAME}: cannot read the ACL file ${file} (${message})`, { cause: err });
    }
    const result = parseAclFile(text, file);
    if (!result.ok) {
      throw new AclFileError('BIFRO_ACL_FILE_INVALID', `${PLUGIN_NAME}: ${result.problems.join('; ')}`);
    }
    this.ruleSet = result.ruleSet;
    this.lastText = text;
    this.logger.info(`acl file ${file} loaded: ${result.ruleSet.rules} rule(s) in ${result.ruleSet.scopes} scope(s)`, {
      file,
      rules: result.ruleSet.rules,
      scopes: result.ruleSet.scopes,
    });
    if (this.closed) return;
    this.watcher = new FileWatcher({
      file,
      pollMs: this.options.pollMs,
      debounceMs: this.options.debounceMs,
      watch: this.options.watch,
      logger: this.logger,
      onChange: () => void this.reload(),
    });
    this.watcher.start();
  }

  checkPermission(client: ClientInfo, action: AccessAction): AccessDecision {
    switch (action.type) {
      case 'connect':
        return this.options.connect === 'grant' ? 'granted' : 'defer';
      case 'unsubscribe':
        return this.options.unsubscribe === 'grant' ? 'granted' : 'defer';
      case 'subscribe': {
        const scopes = this.scopesOf(client);
        for (const scope of scopes) {
          const d = scope.main.check(client, action);
          if (d !== 'defer') return d;
        }
        return this.otherwise;
      }
      case 'publish': {
        const scopes = this.scopesOf(client);
        const plain: AccessAction = action.retain ? { type: 'publish', topic: action.topic, qos: action.qos, retain: false } : action;
        let p: Answer = this.otherwise;
        for (const scope of scopes) {
          const d = scope.main.check(client, plain);
          if (d !== 'defer') {
            p = d;
            break;
          }
        }
        if (!action.retain || p === 'denied') return p;
        // A retained publish also needs the retain question granted (the same rule as the SPI helper).
        let r: Answer = this.otherwise;
        for (const scope of scopes) {
          const d = scope.retain?.check(client, plain) ?? 'defer';
          if (d !== 'defer') {
            r = d;
            break;
          }
        }
        if (r === 'denied') return 'denied';
        return p === 'granted' && r === 'granted' ? 'granted' : 'defer';
      }
    }
  }

  close(): void {
    this.closed = true;
    this.watcher?.close();
    this.watcher = undefined;
  }

  /** Reads the file again now (what a detected change does). Resolves when the new rules apply, or the problems were logged. */
  reload(): Promise<void> {
    return this.reloads();
  }

  private scopesOf(client: ClientInfo): readonly CompiledScope[] {
    const ruleSet = this.ruleSet;
    const hit = this.resolved.get(client);
    if (hit !== undefined && hit.ruleSet === ruleSet) return hit.scopes;
    const scopes = scopesFor(ruleSet, client);
    this.resolved.set(client, { ruleSet, scopes });
    return scopes;
  }

  private async reloadOnce(): Promise<void> {
    const file = this.options.file;
    let text: string;
    try {
      text = await fs.promises.readFile(file, 'utf8');
    } catch (err) {
      if (this.closed) return;
      const message = err instanceof Error ? err.message : String(err);
      this.logger.warn(`acl file ${file} cannot be read (${message}); the previous rules stay`, { file, err: message });
      return;
    }
    if (this.closed || text === this.lastText) return;
    this.lastText = text;
    const result = parseAclFile(text, file);
    if (!result.ok) {
      for (const p of result.problems) this.logger.warn(p, { file, code: 'BIFRO_ACL_FILE_INVALID' });
      this.logger.warn(`acl file ${file} is invalid (${result.problems.length} problem(s)): the previous rules stay`, {
        file,
        code: 'BIFRO_ACL_FILE_INVALID',
        problems: result.problems,
      });
      return;
    }
    this.ruleSet = result.ruleSet;
    this.logger.info(`acl file ${file} reloaded: ${result.ruleSet.rules} rule(s) in ${result.ruleSet.scopes} scope(s)`, {
      file,
      rules: result.ruleSet.rules,
      scopes: result.ruleSet.scopes,
    });
  }
}
