// Test-only: once the view has drawn, run axe-core (WCAG 2 A and AA rules) and write its
// violations into the page, where `chromium --dump-dom` reads them.
"use strict";
(function wait() {
  const main = document.getElementById("main");
  if (!main.hasAttribute("data-view")) { setTimeout(wait, 100); return; }
  axe.run(document, { runOnly: ["wcag2a", "wcag2aa"] }).then(result => {
    const out = document.createElement("pre");
    out.id = "axe-result";
    out.textContent = JSON.stringify(result.violations.map(v => ({
      id: v.id, impact: v.impact, nodes: v.nodes.map(n => n.target.join(" ")) })));
    document.body.append(out);
  });
})();
