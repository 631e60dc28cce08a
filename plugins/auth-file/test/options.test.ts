import * as path from 'node:path';
import { testPluginContext } from '@bifro/spi/testing';
import plugin, { AUTH_FILE_ERRORS } from '../src';
import { parseOptions } from '../src/options';

describe('auth-file: options', () => {
  it('has defaults for everything but file, which is resolved against the config folder', () => {
    expect(parseOptions({ file: 'passwd' }, '/conf')).toEqual({
      file: path.resolve('/conf', 'passwd'),
      tenant: 'default',
      unknownUser: 'defer',
      scram: true,
      certificate: undefined,
      cacheTtlMs: 30000,
      cacheMaxEntries: 10000,
      pollMs: 1000,
      watch: true,
      debounceMs: 100,
    });
    expect(parseOptions({ file: '/etc/bifro/passwd' }, '/conf').file).toBe('/etc/bifro/passwd');
    expect(parseOptions({ file: 'p', certificate: { user: 'SAN:URI', tenant: 'OU' } }, '/c').certificate).toEqual({
      user: 'SAN:URI',
      tenant: { field: 'OU' },
      requireListed: false,
    });
    expect(parseOptions({ file: 'p', tenant: 't', certificate: { user: 'CN' } }, '/c').certificate?.tenant).toEqual({ fixed: 't' });
    expect(parseOptions({ file: 'p', certificate: false }, '/c').certificate).toBeUndefined();
  });

  it.each<[string, Record<string, unknown>, RegExp]>([
    ['file missing', {}, /options\.file must be the path/],
    ['file empty', { file: ' ' }, /options\.file must be/],
    ['unknown option', { file: 'p', users: {} }, /options\.users is not an option/],
    ['tenant with a slash', { file: 'p', tenant: 'a/b' }, /options\.tenant a tenant cannot contain/],
    ['tenant not a string', { file: 'p', tenant: 7 }, /options\.tenant must be a tenant name/],
    ['unknownUser', { file: 'p', unknownUser: 'allow' }, /options\.unknownUser must be defer or reject/],
    ['scram', { file: 'p', scram: 'yes' }, /options\.scram must be true or false/],
    ['cacheTtlMs', { file: 'p', cacheTtlMs: -1 }, /options\.cacheTtlMs must be an integer from 0/],
    ['cacheMaxEntries', { file: 'p', cacheMaxEntries: 0 }, /options\.cacheMaxEntries must be an integer from 1/],
    ['pollMs', { file: 'p', pollMs: 1.5 }, /options\.pollMs must be an integer/],
    ['watch', { file: 'p', watch: 1 }, /options\.watch must be true or false/],
    ['certificate not a map', { file: 'p', certificate: 'CN' }, /options\.certificate must be a map/],
    ['certificate.user', { file: 'p', certificate: { user: 'SAN:IP' } }, /options\.certificate\.user must be one of CN, SAN:DNS/],
    ['certificate unknown key', { file: 'p', certificate: { user: 'CN', tennant: 'O' } }, /options\.certificate\.tennant is not an option/],
    ['certificate.tenant', { file: 'p', certificate: { user: 'CN', tenant: 3 } }, /options\.certificate\.tenant must be O, OU or a fixed/],
    ['certificate.requireListed', { file: 'p', certificate: { user: 'CN', requireListed: 'no' } }, /options\.certificate\.requireListed/],
  ])('refuses %s with BIFRO_AUTH_FILE_OPTIONS_INVALID naming the plugin and the key', (_label, options, message) => {
    let thrown: unknown;
    try {
      plugin.auth(testPluginContext({ options, configDir: '/conf' }));
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(Error);
    expect((thrown as Error).message).toMatch(/^BIFRO_AUTH_FILE_OPTIONS_INVALID: @bifro\/plugin-auth-file: /);
    expect((thrown as Error).message).toMatch(message);
    expect((thrown as { code?: string }).code).toBe('BIFRO_AUTH_FILE_OPTIONS_INVALID');
  });

  it('declares its codes (BIFRO_AUTH_FILE_*), each with a summary and a remedy', () => {
    expect(plugin.errors).toBe(AUTH_FILE_ERRORS);
    for (const [code, spec] of Object.entries(AUTH_FILE_ERRORS)) {
      expect(code).toMatch(/^BIFRO_AUTH_FILE_[A-Z_]+$/);
      expect(spec.summary.length).toBeGreaterThan(10);
      expect(spec.remedy.length).toBeGreaterThan(10);
    }
  });
});
