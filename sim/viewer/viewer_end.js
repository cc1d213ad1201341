// The end of the viewer: what #probe found, and the page marked ready (the tests wait for it) with
// the time it took.
"use strict";
(function () {
  const FS = window.FS;
  if (FS.probing) document.getElementById("probe").textContent = FS.probeOut.map((o) => JSON.stringify(o)).join("\n");
  document.body.setAttribute("data-ready", "1");
  // Milliseconds from the start of navigation to every view drawn (the page's scripts run before
  // its first paint): docs/viewer.md quotes it for a 1 M-event run.
  document.body.setAttribute("data-ready-ms", String(Math.round(performance.now())));
})();
