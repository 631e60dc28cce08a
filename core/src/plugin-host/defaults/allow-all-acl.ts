import type { AccessControl } from '@bifro/spi';

export const ALLOW_ALL_ACL = '@bifro/core:allow-all-acl';

/** Grants every action. Loaded when no access control plugin is configured. */
export function createAllowAllAcl(): AccessControl {
  return { checkPermission: () => 'granted' };
}
