/**
 * How big the fault tests run: `npm test` runs them small; `npm run test:chaos` (CHAOS=full)
 * runs them at the size the reliability issue asks for.
 */
export const FULL = process.env.CHAOS === 'full';

export function pick<T>(small: T, full: T): T {
  return FULL ? full : small;
}

/** One line for the record of what a fault test did. */
export function report(what: string, figures: Record<string, unknown>): void {
  const text = Object.entries(figures)
    .map(([name, value]) => `${name} ${typeof value === 'number' ? Math.round(value * 100) / 100 : String(value)}`)
    .join(', ');
  console.log(`[chaos${FULL ? ' full' : ''}] ${what}: ${text}`);
}
