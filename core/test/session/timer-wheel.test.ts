import { TimerWheel, type WheelEntry } from '../../src/session/timer-wheel';

function entry(deadlines: number[], fired: number[]): WheelEntry {
  return {
    wheelSlot: -1,
    onWheelTick(now) {
      const deadline = deadlines[0]!;
      if (now < deadline) return deadline;
      fired.push(now);
      deadlines.shift();
      return deadlines[0] ?? 0;
    },
  };
}

describe('TimerWheel', () => {
  let wheel: TimerWheel;
  afterEach(() => wheel.close());

  it('fires an entry once its deadline has passed, never before', () => {
    wheel = new TimerWheel(100, 16);
    const t0 = Date.now();
    const fired: number[] = [];
    wheel.schedule(entry([t0 + 350], fired), t0 + 350);
    for (let i = 1; i <= 6; i++) wheel.tick(t0 + i * 100);
    expect(fired).toEqual([t0 + 400]);
  });

  it('places a deadline beyond one turn of the wheel again until it is due', () => {
    wheel = new TimerWheel(100, 4);
    const t0 = Date.now();
    const fired: number[] = [];
    wheel.schedule(entry([t0 + 1000], fired), t0 + 1000);
    for (let i = 1; i <= 12; i++) wheel.tick(t0 + i * 100);
    expect(fired).toEqual([t0 + 1000]);
  });

  it('scheduleBy moves an entry earlier, never later (one entry, the earliest of its deadlines)', () => {
    wheel = new TimerWheel(100, 64);
    const t0 = Date.now();
    const fired: number[] = [];
    const e = entry([t0 + 300], fired);
    wheel.schedule(e, t0 + 3000);
    const late = e.wheelSlot;
    wheel.scheduleBy(e, t0 + 300);
    const early = e.wheelSlot;
    expect(early).not.toBe(late);
    wheel.scheduleBy(e, t0 + 2000); // later than where it sits: stays
    expect(e.wheelSlot).toBe(early);
    for (let i = 1; i <= 4; i++) wheel.tick(t0 + i * 100);
    expect(fired).toEqual([t0 + 300]);
    const idle = entry([t0 + 500], []);
    wheel.scheduleBy(idle, t0 + 500); // not scheduled yet: placed
    expect(idle.wheelSlot).toBeGreaterThanOrEqual(0);
  });

  it('forgets a cancelled entry', () => {
    wheel = new TimerWheel(100, 8);
    const t0 = Date.now();
    const fired: number[] = [];
    const e = entry([t0 + 200], fired);
    wheel.schedule(e, t0 + 200);
    wheel.cancel(e);
    expect(e.wheelSlot).toBe(-1);
    for (let i = 1; i <= 8; i++) wheel.tick(t0 + i * 100);
    expect(fired).toEqual([]);
  });

  it('catches up every slot the clock passed in one tick (a stalled event loop, a clock moved forward)', () => {
    let now = 1_000_000;
    wheel = new TimerWheel(100, 64, { clock: () => now, manual: true });
    const fired: number[] = [];
    wheel.schedule(entry([now + 350], fired), now + 350);
    wheel.schedule(entry([now + 2000], fired), now + 2000);
    now += 1000; // ten slots in one step
    wheel.tick(now);
    expect(fired).toEqual([now]);
    now += 100;
    wheel.tick(now);
    expect(fired).toHaveLength(1);
    now += 1000;
    wheel.tick(now);
    expect(fired).toEqual([1_001_000, 1_002_100]);
  });

  it('after a jump of more than one turn, fires what is due and keeps later deadlines', () => {
    let now = 5_000_000;
    wheel = new TimerWheel(100, 8, { clock: () => now, manual: true });
    const fired: number[] = [];
    wheel.schedule(entry([now + 300], fired), now + 300);
    wheel.schedule(entry([now + 5000], fired), now + 5000);
    now += 3000; // nearly four turns of an 8-slot wheel
    wheel.tick(now);
    expect(fired).toEqual([5_003_000]);
    for (let i = 0; i < 25; i++) wheel.tick((now += 100));
    expect(fired).toEqual([5_003_000, 5_005_000]);
  });
});
