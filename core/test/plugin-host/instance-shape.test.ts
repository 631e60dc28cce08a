import { instanceProblems } from '../../src/plugin-host/instance-shape';

describe('instanceProblems: throttler', () => {
  it('accepts a throttler with or without quota (SPI 1.5.0)', () => {
    expect(instanceProblems('throttler', { hasResource: () => true })).toEqual([]);
    expect(instanceProblems('throttler', { hasResource: () => true, quota: () => 10 })).toEqual([]);
  });

  it('names a quota that is not a function', () => {
    expect(instanceProblems('throttler', { hasResource: () => true, quota: 10 })).toEqual(['throttler.quota is not a function']);
  });
});
