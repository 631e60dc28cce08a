import { attachedAclRules, type AccessAction, type AccessControl, type AccessDecision, type ClientInfo } from '@bifro/spi';
import type { AclFallback, AclHttpOptions } from './options';

const FALLBACK: Readonly<Record<AclFallback, AccessDecision>> = { defer: 'defer', grant: 'granted', deny: 'denied' };

/**
 * The acl kind: answers from the ACL rules the auth answer attached to the session
 * (`attrs['bifro.acl']`, compiled once per distinct rule text by the SPI's `attachedAclRules`),
 * synchronously and without I/O. No HTTP request is made per PUBLISH or SUBSCRIBE.
 *
 * - `connect`: `options.connect` (granted by default: the auth answer already decided), except
 *   that malformed attached rules deny it (fail closed).
 * - A client without rules: `options.withoutRules` (defer by default).
 * - `unsubscribe` by a client with rules: granted (rules do not cover it; malformed rules deny it).
 * - Rules that match nothing: `options.unmatched` (defer by default; a chain in which every
 *   plugin defers denies).
 */
export class HttpAcl implements AccessControl {
  private readonly connect: AccessDecision;
  private readonly withoutRules: AccessDecision;
  private readonly unmatched: AccessDecision;

  constructor(options: AclHttpOptions) {
    this.connect = options.connect === 'grant' ? 'granted' : 'defer';
    this.withoutRules = FALLBACK[options.withoutRules];
    this.unmatched = FALLBACK[options.unmatched];
  }

  checkPermission(client: ClientInfo, action: AccessAction): AccessDecision {
    const rules = attachedAclRules(client);
    if (action.type === 'connect') {
      return rules !== undefined && rules.check(client, action) === 'denied' ? 'denied' : this.connect;
    }
    if (rules === undefined) return this.withoutRules;
    const decision = rules.check(client, action);
    // Rules do not cover unsubscribe; dropping a subscription reveals nothing.
    if (action.type === 'unsubscribe') return decision === 'denied' ? 'denied' : 'granted';
    return decision === 'defer' ? this.unmatched : decision;
  }
}
