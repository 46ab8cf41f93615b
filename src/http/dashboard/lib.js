// The console's one UI library: Preact with htm (tagged templates, no build step), served from
// punctual's installed packages at /ui/vendor/. htm escapes every value it is given: data from the
// API is always text, never HTML.
import { h, render, Fragment } from '/ui/vendor/preact.js';
import { useState, useEffect, useRef, useCallback, useMemo } from '/ui/vendor/hooks.js';
import htm from '/ui/vendor/htm.js';

export const html = htm.bind(h);
export { render, Fragment, useState, useEffect, useRef, useCallback, useMemo };
