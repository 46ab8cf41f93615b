/**
 * The stored pause and limits of each type (punctual_type_controls), as this process has them in force.
 * Replacing them answers which types a change touched, so only those types' waiting tasks are
 * asked again. Reading the table is TypeControls' part (type-controls.ts); this holds what it read.
 */
import type { TypeControl } from '../store/type-controls.js';

export class SettingsCache {
  #controls = new Map<string, TypeControl>();

  /** Puts `controls` in force; answers the types whose settings changed (added, altered or removed). */
  replace(controls: readonly TypeControl[]): string[] {
    const before = this.#controls;
    const after = new Map(controls.map((control) => [control.type, control]));
    this.#controls = after;
    return [...new Set([...before.keys(), ...after.keys()])].filter(
      (type) => JSON.stringify(before.get(type)) !== JSON.stringify(after.get(type)),
    );
  }

  get(type: string): TypeControl | undefined {
    return this.#controls.get(type);
  }

  /** The types with stored settings. */
  types(): IterableIterator<string> {
    return this.#controls.keys();
  }
}
