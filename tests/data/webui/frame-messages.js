// Test-only: what a component's HTML artifact, in its sandboxed frame, posts to the page
// (the test's artifact reports its origin, whether it could read the cookie and whether a
// request to the UI got through), written where --dump-dom shows it.
"use strict";
window.addEventListener("message", ev => {
  let out = document.getElementById("frame-messages");
  if (!out) {
    out = document.createElement("pre");
    out.id = "frame-messages";
    document.body.append(out);
  }
  out.textContent += JSON.stringify({ from: ev.origin, data: ev.data }) + "\n";
});
