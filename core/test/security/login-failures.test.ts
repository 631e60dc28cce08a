import { LoginFailures, scramLogin, type LoginFailureLimits } from '../../src/security/login-failures';

const LIMITS: LoginFailureLimits = {
  perLogin: 3,
  perAddress: 5,
  windowSeconds: 60,
  backoffMs: 1000,
  maxBackoffMs: 4000,
  maxTrackedKeys: 1000,
};

function withClock(limits: Partial<LoginFailureLimits> = {}): { failures: LoginFailures; advance: (ms: number) => void } {
  let now = 1_000_000;
  const failures = new LoginFailures({ ...LIMITS, ...limits }, () => now);
  return { failures, advance: (ms) => (now += ms) };
}

describe('LoginFailures', () => {
  it('lets attempts go until a login has failed perLogin times, then spaces them out with a delay, doubling up to the cap', () => {
    const { failures } = withClock({ perAddress: 0 });
    for (let i = 0; i < 3; i++) {
      expect(failures.admit('10.0.0.1', 'bob')).toEqual({ type: 'go', delayMs: 0 });
      failures.failed('10.0.0.1', 'bob');
    }
    // Third failure: one attempt per second; two at once get the next two slots.
    expect(failures.admit('10.0.0.2', 'bob')).toEqual({ type: 'go', delayMs: 1000 });
    expect(failures.admit('10.0.0.3', 'bob')).toEqual({ type: 'go', delayMs: 2000 });
    expect(failures.admit('10.0.0.4', 'bob')).toEqual({ type: 'go', delayMs: 3000 });
    expect(failures.admit('10.0.0.5', 'bob')).toEqual({ type: 'go', delayMs: 4000 });
    // Past the longest hold: refused, without asking anyone.
    expect(failures.admit('10.0.0.6', 'bob')).toEqual({ type: 'refuse', key: 'login' });
    // Other logins are not affected.
    expect(failures.admit('10.0.0.1', 'alice')).toEqual({ type: 'go', delayMs: 0 });
    expect(failures.delayed).toBe(4);
    expect(failures.refused).toBe(1);
  });

  it('a success forgets the login; a count is forgotten windowSeconds after its last failure', () => {
    const { failures, advance } = withClock({ perAddress: 0 });
    for (let i = 0; i < 3; i++) failures.failed('10.0.0.1', 'bob');
    expect(failures.admit('10.0.0.1', 'bob').type).toBe('go');
    failures.succeeded('bob');
    expect(failures.admit('10.0.0.1', 'bob')).toEqual({ type: 'go', delayMs: 0 });
    for (let i = 0; i < 3; i++) failures.failed('10.0.0.1', 'carol');
    advance(60_000);
    expect(failures.admit('10.0.0.1', 'carol')).toEqual({ type: 'go', delayMs: 0 });
    expect(failures.size.logins).toBe(0);
  });

  it('refuses an address past perAddress failures between its slots; the logins it guessed stay usable from elsewhere', () => {
    const { failures, advance } = withClock({ perLogin: 10 });
    for (let i = 0; i < 5; i++) failures.failed('10.6.6.6', 'bob');
    expect(failures.admit('10.6.6.6', 'bob')).toEqual({ type: 'refuse', key: 'address' });
    expect(failures.admit('10.6.6.6', 'alice')).toEqual({ type: 'refuse', key: 'address' });
    // bob from another address: not refused, not delayed (5 failures are below perLogin 10).
    expect(failures.admit('10.0.0.2', 'bob')).toEqual({ type: 'go', delayMs: 0 });
    // The refused attempts did not count: after the interval the address gets one attempt, then waits again.
    advance(1000);
    expect(failures.admit('10.6.6.6', 'bob')).toEqual({ type: 'go', delayMs: 0 });
    expect(failures.admit('10.6.6.6', 'bob')).toEqual({ type: 'refuse', key: 'address' });
    failures.failed('10.6.6.6', 'bob');
    // Sixth failure: the interval doubled.
    advance(1000);
    expect(failures.admit('10.6.6.6', 'x').type).toBe('refuse');
    advance(1000);
    expect(failures.admit('10.6.6.6', 'x').type).toBe('go');
  });

  it('a success does not reset the address count (one valid account cannot launder guesses)', () => {
    const { failures } = withClock({ perLogin: 0 });
    for (let i = 0; i < 5; i++) failures.failed('10.6.6.6', `user${i}`);
    failures.succeeded('mine');
    expect(failures.admit('10.6.6.6', 'mine').type).toBe('refuse');
  });

  it('0 turns a key off; both 0 is off entirely', () => {
    const { failures } = withClock({ perLogin: 0, perAddress: 0 });
    for (let i = 0; i < 50; i++) failures.failed('10.0.0.1', 'bob');
    expect(failures.enabled).toBe(false);
    expect(failures.admit('10.0.0.1', 'bob')).toEqual({ type: 'go', delayMs: 0 });
    expect(failures.size).toEqual({ logins: 0, addresses: 0 });
  });

  it('keeps at most maxTrackedKeys logins and addresses: the one quiet the longest goes first', () => {
    const { failures, advance } = withClock({ perLogin: 1, perAddress: 1, maxTrackedKeys: 1000 });
    failures.failed('10.0.0.0', 'victim');
    for (let i = 1; i <= 1500; i++) {
      advance(1);
      failures.failed(`10.0.${i >> 8}.${i & 255}`, `user-${i}`);
    }
    expect(failures.size).toEqual({ logins: 1000, addresses: 1000 });
    expect(failures.admit('10.9.9.9', 'victim')).toEqual({ type: 'go', delayMs: 0 });
    // The newest are still tracked: backing off.
    expect(failures.admit('10.9.9.8', 'user-1500')).toEqual({ type: 'go', delayMs: 1000 });
    expect(failures.admit('10.0.5.220', 'x')).toEqual({ type: 'refuse', key: 'address' });
  });
});

describe('scramLogin', () => {
  it('reads the n= user of a client-first message, with =2C and =3D decoded', () => {
    expect(scramLogin(Buffer.from('n,,n=acme/alice,r=abc'))).toBe('acme/alice');
    expect(scramLogin(Buffer.from('y,a=x,n=a=2Cb=3Dc,r=abc'))).toBe('a,b=c');
    expect(scramLogin(Buffer.from('garbage'))).toBeUndefined();
    expect(scramLogin(Buffer.from('n,,r=abc'))).toBeUndefined();
    expect(scramLogin(undefined)).toBeUndefined();
  });
});
