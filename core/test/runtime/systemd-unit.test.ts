import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** conf/bifro.service: systemd accepts it, and it starts the CLI this repository builds with SIGTERM drain. */
const REPO = path.resolve(__dirname, '..', '..', '..');
const UNIT = readFileSync(path.join(REPO, 'conf', 'bifro.service'), 'utf8');

function directive(name: string): string {
  const line = UNIT.split('\n').find((l) => l.startsWith(`${name}=`));
  if (line === undefined) throw new Error(`conf/bifro.service has no ${name}=`);
  return line.slice(name.length + 1);
}

describe('conf/bifro.service', () => {
  it('starts the built CLI of this layout with a config file', () => {
    const [node, cli, command, ...args] = directive('ExecStart').split(' ');
    expect(node).toBe('/usr/bin/node');
    expect(path.relative('/opt/bifro', cli!)).toBe(path.join('core', 'dist', 'cli', 'main.js'));
    expect(existsSync(path.join(REPO, 'core', 'src', 'cli', 'main.ts'))).toBe(true);
    expect([command, ...args]).toEqual(['start', '--config', '/etc/bifro/bifro.yml']);
  });

  it('stops with SIGTERM and waits longer than the broker’s own 30 s stop limit', () => {
    expect(directive('KillSignal')).toBe('SIGTERM');
    expect(Number(directive('TimeoutStopSec'))).toBeGreaterThan(30);
  });

  it('passes systemd-analyze verify', () => {
    // The unit as installed, with this machine's node and CLI, so verify can check the binary.
    const dir = mkdtempSync(path.join(os.tmpdir(), 'bifro-unit-'));
    try {
      const unit = path.join(dir, 'bifro.service');
      writeFileSync(
        unit,
        UNIT.replace(/^ExecStart=.*$/m, `ExecStart=${process.execPath} ${path.join(REPO, 'core', 'dist', 'cli', 'main.js')} start`),
      );
      // verify exits 0 on unknown keys too: what it prints is the verdict.
      const run = spawnSync('systemd-analyze', ['verify', unit], { encoding: 'utf8' });
      expect(run.error).toBeUndefined();
      expect({ status: run.status, output: `${run.stdout}${run.stderr}` }).toEqual({ status: 0, output: '' });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
