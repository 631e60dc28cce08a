import { FlowWindow } from '../../bench/src/flow-window';

describe('FlowWindow', () => {
  it('lets publishers run at most `size` messages ahead and wakes them once half is taken', () => {
    let done = 0;
    const w = new FlowWindow(10, () => done);
    expect(w.tryAcquire(6)).toBe(true);
    expect(w.tryAcquire(6)).toBe(false);
    let woken = 0;
    w.wait(() => woken++);
    w.poke();
    expect(woken).toBe(0);
    done = 1;
    w.poke();
    expect(woken).toBe(1);
    expect(w.tryAcquire(5)).toBe(true);
    expect(w.tryAcquire(1)).toBe(false);
    w.stop();
  });

  it('writes off what never arrives after a stall and resumes', async () => {
    const w = new FlowWindow(4, () => 0, 40);
    w.start();
    expect(w.tryAcquire(4)).toBe(true);
    expect(w.tryAcquire(1)).toBe(false);
    await new Promise<void>((resolve) => w.wait(resolve));
    expect(w.stalls).toBe(1);
    expect(w.lost).toBe(4);
    expect(w.tryAcquire(4)).toBe(true);
    w.stop();
  });
});
