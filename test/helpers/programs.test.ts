import { describe, expect, it, vi } from 'vitest';
import { programFound, skipWithout } from './programs.js';

describe('skipWithout: tests that need a program npm does not install', () => {
  it('runs them when the program is there (an absolute path, or a name on PATH)', () => {
    expect(skipWithout(process.execPath, 'x', 'install it', { PATH: '' })).toBe(false);
    expect(programFound('node', `/nowhere:${process.execPath.replace(/\/node$/, '')}`)).toBe(true);
  });

  it('without it, skips and says why and how to run them', () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    try {
      expect(skipWithout('redis-server', 'the distributed tests', 'apt-get install -y redis-server', { PATH: '/nowhere' })).toBe(true);
      expect(warn).toHaveBeenCalledWith(expect.stringMatching(/^the distributed tests skipped: redis-server is not installed\. To run: apt-get install -y redis-server/));
    } finally {
      warn.mockRestore();
    }
  });

  it('without it, under SWARMSTATE_REQUIRE_ALL=1 (CI), fails instead of skipping', () => {
    expect(() => skipWithout('/no/such/chromium', 'the report browser test', 'apt-get install -y chromium', { PATH: '', SWARMSTATE_REQUIRE_ALL: '1' })).toThrow(
      'the report browser test cannot run: /no/such/chromium is not installed (apt-get install -y chromium), and SWARMSTATE_REQUIRE_ALL=1 requires every test to run',
    );
  });
});
