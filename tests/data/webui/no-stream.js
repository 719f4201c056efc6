// Test-only: `chromium --dump-dom --virtual-time-budget` waits for the network to go quiet,
// which an open event stream never does; without EventSource the page polls every 2 s
// (its fallback), which virtual time runs through. The live stream is tested over CDP.
"use strict";
window.EventSource = undefined;
