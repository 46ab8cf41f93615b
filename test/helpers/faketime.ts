/**
 * libfaketime for the real server: its wall clock (CLOCK_REALTIME, which Node's Date.now reads)
 * runs at an offset read from a file on every call, while its monotonic clock is left alone — what
 * an NTP step or a resumed VM does to a process. The tests step the clock by rewriting the file.
 * Debian's `faketime` package provides the library; `.ci/run` installs it.
 */
import { existsSync, mkdtempSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const LIBRARY = 'libfaketimeMT.so.1'; // the variant with locks: Node reads the clock from several threads

/** The library's path, or undefined when the faketime package is not installed. */
export function findFaketime(): string | undefined {
  const candidates = [process.env.FAKETIME_LIBRARY, `/usr/lib/faketime/${LIBRARY}`];
  for (const dir of existsSync('/usr/lib') ? readdirSync('/usr/lib') : []) {
    if (dir.endsWith('-linux-gnu')) candidates.push(`/usr/lib/${dir}/faketime/${LIBRARY}`);
  }
  return candidates.find((path): path is string => path !== undefined && existsSync(path));
}

export interface FakeClock {
  /** The environment that puts a child process on this clock. */
  env: Record<string, string>;
  /** Sets the offset from the real time, in seconds (negative: behind). Takes effect at once. */
  setOffset(seconds: number): void;
  remove(): void;
}

export function createFakeClock(): FakeClock {
  const library = findFaketime();
  if (library === undefined) {
    throw new Error(
      "libfaketime is missing: install Debian's faketime package (apt-get install faketime; .ci/run does) or set FAKETIME_LIBRARY to libfaketimeMT.so.1",
    );
  }
  const dir = mkdtempSync(join(tmpdir(), 'punctual-faketime-'));
  const file = join(dir, 'offset');
  const setOffset = (seconds: number) => {
    // Written aside and renamed: the server never reads a half-written file.
    writeFileSync(`${file}.next`, `${seconds >= 0 ? '+' : ''}${seconds}\n`);
    renameSync(`${file}.next`, file);
  };
  setOffset(0);
  return {
    env: {
      LD_PRELOAD: library,
      FAKETIME_TIMESTAMP_FILE: file,
      FAKETIME_NO_CACHE: '1',
      FAKETIME_DONT_FAKE_MONOTONIC: '1',
    },
    setOffset,
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
