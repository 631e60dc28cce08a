import { execFileSync } from 'node:child_process';
import { pbkdf2Sync } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { HASH_FORMATS, hashPassword, parsePasswordHash, verifyPassword, type HashFormat } from '../src/password-hash';

const utf8 = (s: string): Uint8Array => new TextEncoder().encode(s);

/** What parsePasswordHash throws for `stored`. */
function problem(stored: string, allowed: readonly HashFormat[] = HASH_FORMATS): string {
  try {
    parsePasswordHash(stored, allowed);
  } catch (err) {
    return (err as Error).message;
  }
  throw new Error(`accepted ${stored}`);
}

describe('auth-postgres: password hashes', () => {
  it('verifies a $7$ hash written by mosquitto_passwd (a fixed vector)', async () => {
    const stored = '$7$101$ak53wWjb5vwlWoU5$/rRL4D33h747bSG/DTpauvsD0mBOF20r/+Ka286I7ZfwnhAlqliEIZPdwnZAGX5+XH5pLqpKh8YlBahAWRYYNA==';
    const hash = parsePasswordHash(stored);
    expect(hash).toMatchObject({ format: 'mosquitto', digest: 'sha512', iterations: 101 });
    await expect(verifyPassword(utf8('s3cret'), hash)).resolves.toBe(true);
    await expect(verifyPassword(utf8('s3cre'), hash)).resolves.toBe(false);
    await expect(verifyPassword(utf8(''), hash)).resolves.toBe(false);
  });

  it('verifies what the installed mosquitto_passwd writes now', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'bifro-pg-mosquitto-'));
    try {
      const file = path.join(dir, 'passwd');
      execFileSync('mosquitto_passwd', ['-c', '-b', file, 'alice', 'pässword with spaces'], { timeout: 10_000 });
      const stored = readFileSync(file, 'utf8').trim().split(':').slice(1).join(':');
      const hash = parsePasswordHash(stored);
      await expect(verifyPassword(utf8('pässword with spaces'), hash)).resolves.toBe(true);
      await expect(verifyPassword(utf8('password with spaces'), hash)).resolves.toBe(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it.each(HASH_FORMATS)('hashPassword(%s) round-trips through parse and verify, binary passwords included', async (format) => {
    const cheap = { format, iterations: 1000, log2N: 10 } as const;
    const stored = await hashPassword('s3cret', cheap);
    const hash = parsePasswordHash(stored);
    expect(hash.format).toBe(format);
    await expect(verifyPassword(utf8('s3cret'), hash)).resolves.toBe(true);
    await expect(verifyPassword(utf8('S3cret'), hash)).resolves.toBe(false);
    const binary = Uint8Array.from([0, 0xff, 0xc3, 0x28]);
    const storedBinary = await hashPassword(binary, cheap);
    await expect(verifyPassword(binary, parsePasswordHash(storedBinary))).resolves.toBe(true);
    // A view into a larger buffer is read at its offset.
    const backing = Buffer.concat([Buffer.from('xx'), Buffer.from(binary), Buffer.from('yy')]);
    await expect(verifyPassword(backing.subarray(2, 6), parsePasswordHash(storedBinary))).resolves.toBe(true);
  });

  it('two hashes of one password differ (random salt)', async () => {
    expect(await hashPassword('p', { log2N: 10 })).not.toBe(await hashPassword('p', { log2N: 10 }));
  });

  it('verifies the RFC 7914 scrypt test vector and an independently derived PBKDF2-SHA256 hash', async () => {
    // RFC 7914 section 12: scrypt("pleaseletmein", "SodiumChloride", N=16384, r=8, p=1, dkLen=64).
    const rfc =
      '7023bdcb3afd7348461c06cd81fd38ebfda8fbba904f8e3ea9b543f6545da1f2d5432955613f0fcf62d49705242a9af9e61e85dc0d651e40dfcf017b45575887';
    const b64 = (b: Buffer): string => b.toString('base64').replace(/=+$/, '');
    const scryptStored = `$scrypt$ln=14,r=8,p=1$${b64(Buffer.from('SodiumChloride'))}$${b64(Buffer.from(rfc, 'hex'))}`;
    await expect(verifyPassword(utf8('pleaseletmein'), parsePasswordHash(scryptStored))).resolves.toBe(true);
    await expect(verifyPassword(utf8('pleaseletmeout'), parsePasswordHash(scryptStored))).resolves.toBe(false);
    const salt = Buffer.from('saltsaltsaltsalt');
    const ab64 = (b: Buffer): string => b64(b).replace(/\+/g, '.');
    const pbkdf2Stored = `$pbkdf2-sha256$1000$${ab64(salt)}$${ab64(pbkdf2Sync('password', salt, 1000, 32, 'sha256'))}`;
    await expect(verifyPassword(utf8('password'), parsePasswordHash(pbkdf2Stored))).resolves.toBe(true);
  });

  it('refuses plain text, fast digests, bad encodings and costs out of bounds, without echoing the hash', () => {
    expect(problem('s3cret')).toMatch(/no known format \(plain text is not accepted\)/);
    expect(problem('$6$salt$aGFzaA==')).toMatch(/\$6\$ hashes are one round of a fast digest/);
    expect(problem('$1$salt$hash')).toMatch(/fast digest/);
    expect(problem('$7$101$!!!$aGFzaA==')).toMatch(/the salt is not base64/);
    expect(problem('$7$0$ak53wWjb5vwlWoU5$aGFzaGhhc2hoYXNoaGFzaA==')).toMatch(/iteration count must be a positive integer/);
    expect(problem('$7$99999999$ak53wWjb5vwlWoU5$aGFzaGhhc2hoYXNoaGFzaA==')).toMatch(/above the maximum 10000000/);
    expect(problem('$7$101$c2FsdA==$aGFzaGhhc2hoYXNoaGFzaA==')).toMatch(/the salt has 4 bytes, at least 8/);
    expect(problem('$7$101$ak53wWjb5vwlWoU5$aGFzaA==')).toMatch(/the hash has 4 bytes, at least 16/);
    expect(problem('$7$101$ak53wWjb5vwlWoU5')).toMatch(/has the form \$7\$<iterations>\$<salt>\$<hash>/);
    expect(problem('$scrypt$ln=22,r=8,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA')).toMatch(/need more than 256 MiB/);
    expect(problem('$scrypt$ln=10,r=8$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA')).toMatch(/must be ln, r and p/);
    const secret = '$pbkdf2-sha1$1000$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA';
    expect(problem(secret)).not.toContain('aGFzaGhh');
  });

  it('refuses a format the passwordHash option does not allow', async () => {
    const stored = await hashPassword('p', { format: 'pbkdf2-sha512', iterations: 1000 });
    expect(problem(stored, ['scrypt', 'mosquitto'])).toMatch(
      /the hash format pbkdf2-sha512 is not allowed by options.passwordHash \(scrypt, mosquitto\)/,
    );
  });
});
