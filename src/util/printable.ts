/**
 * Text from a task (a key, a type, an error, a payload) made safe for a terminal or a log line:
 * what a terminal acts on, or a reader takes for the end of a line, written as \uXXXX. That is
 * C0 and C1 control characters, DEL, NEL (U+0085) and the line and paragraph separators (Python's
 * splitlines() and other log readers break a line at them), and the bidirectional overrides that
 * show a line in another order than it is. Raw, a key could clear the screen, write the clipboard
 * (OSC 52), forge a row of a table or cut a JSON log line in two.
 */

// eslint-disable-next-line no-control-regex -- finding control characters is the point
const TERMINAL_CONTROLS = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
/** The same, but for JSON text: JSON.stringify escapes C0 inside strings itself, and its own newlines are layout. */
const JSON_CONTROLS = /[\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
const escaped = (char: string) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`;

/** `text` with everything a terminal acts on written as \uXXXX. */
export function printable(text: string): string {
  return text.replace(TERMINAL_CONTROLS, escaped);
}

/**
 * JSON text with what a terminal acts on and JSON.stringify leaves raw written as \uXXXX (still
 * valid JSON, the same value). Also for a string a JSON logger writes: it escapes C0 itself.
 */
export function printableJson(json: string): string {
  return json.replace(JSON_CONTROLS, escaped);
}
