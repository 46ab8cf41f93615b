/** The settings in force: replacing them answers which types a change touched, and only those. */
import { describe, expect, it } from 'vitest';
import { SettingsCache } from '../../src/dispatch/settings-cache.js';
import { aControl as control } from '../helpers/tasks.js';

describe('the settings cache', () => {
  it('answers the types added, altered and removed, and not the ones left as they were', () => {
    const cache = new SettingsCache();
    expect(cache.replace([control('a'), control('b')])).toEqual(['a', 'b']);
    expect(cache.replace([control('a'), control('b', { paused: true, updatedAt: 2 }), control('c')])).toEqual(['b', 'c']);
    expect(cache.replace([control('b', { paused: true, updatedAt: 2 })])).toEqual(['a', 'c']);
    expect(cache.replace([control('b', { paused: true, updatedAt: 2 })])).toEqual([]);
  });

  it('holds what it was given last', () => {
    const cache = new SettingsCache();
    cache.replace([control('a', { maxConcurrency: 3 })]);
    expect(cache.get('a')?.maxConcurrency).toBe(3);
    expect(cache.get('z')).toBeUndefined();
    cache.replace([]);
    expect(cache.get('a')).toBeUndefined();
    expect([...cache.types()]).toEqual([]);
  });
});
