import { attachedAclRules, type AccessAction, type AccessControl, type AccessDecision, type ClientInfo } from '@bifro/spi';
import type { AclPostgresOptions } from './options';

/**
 * The ACL kind: answers from the rules the auth kind attached to the client at CONNECT
 * (`attrs[ACL_RULES_ATTR]`, compiled once per distinct rule text by the SPI's
 * `attachedAclRules`), synchronously, with no database query per PUBLISH or SUBSCRIBE.
 *
 * - `connect`: `options.connect` (default `granted`: the auth kind decided who connects), or
 *   `denied` when the client's rules attribute is malformed (fail closed).
 * - publish / subscribe: the first matching rule decides; no rule matched → `options.unmatched`
 *   (default `defer`: a chain where every plugin defers denies).
 * - unsubscribe: `granted` (dropping a subscription is never a risk), unless the attribute is malformed.
 * - a client that carries no rules (authenticated by another provider, or `aclQuery: false`):
 *   `defer` for every action but `connect`, so that the next ACL plugin decides.
 */
export class PostgresAcl implements AccessControl {
  constructor(private readonly options: AclPostgresOptions) {}

  checkPermission(client: ClientInfo, action: AccessAction): AccessDecision {
    const rules = attachedAclRules(client);
    if (action.type === 'connect') {
      return rules !== undefined && rules.check(client, action) === 'denied' ? 'denied' : this.options.connect;
    }
    if (rules === undefined) return 'defer';
    const decision = rules.check(client, action);
    if (decision !== 'defer') return decision;
    return action.type === 'unsubscribe' ? 'granted' : this.options.unmatched;
  }
}
