import { attachedAclRules, type AccessAction, type AccessControl, type AccessDecision, type ClientInfo } from '@bifro/spi';
import type { JwtAclOptions } from './options';

/**
 * Enforces the ACL rules the JWT auth attached to the session (`attrs['bifro.acl']`, from the
 * token's `aclClaim`). Synchronous and from memory: the rules are compiled once per distinct
 * attribute text by the SPI's `attachedAclRules` (bounded cache), never per PUBLISH.
 *
 * - In a chain (default): the first matching rule grants or denies; no match, `connect`,
 *   `unsubscribe` and clients without token rules defer to the next ACL plugin.
 * - `standalone: true` (the only ACL of the broker): `connect` and `unsubscribe` are granted,
 *   and a publish or subscribe no token rule allows is denied (clients without rules included).
 *
 * A malformed rules attribute denies everything, `connect` included (fail closed).
 */
export class JwtAcl implements AccessControl {
  constructor(readonly options: JwtAclOptions) {}

  checkPermission(client: ClientInfo, action: AccessAction): AccessDecision {
    const rules = attachedAclRules(client);
    const decision = rules === undefined ? 'defer' : rules.check(client, action);
    if (decision !== 'defer' || !this.options.standalone) return decision;
    return action.type === 'connect' || action.type === 'unsubscribe' ? 'granted' : 'denied';
  }
}
