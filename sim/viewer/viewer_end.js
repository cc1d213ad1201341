// The end of the viewer: what #probe found, and the page marked ready (the tests wait for it) with
// the time it took.
"use strict";
(function () {
  const FS = window.FS;
  function ready() {
    if (FS.probing) document.getElementById("probe").textContent = FS.probeOut.map((o) => JSON.stringify(o)).join("\n");
    document.body.setAttribute("data-ready", "1");
    // Milliseconds from the start of navigation to the first screen drawn (with #eager or #probe:
    // every view): docs/viewer.md quotes it for the big recordings.
    document.body.setAttribute("data-ready-ms", String(Math.round(performance.now())));
  }
  // Once the views drawn now (those waiting for the allocation log: FS.afterLogs) are done,
  // and any work they queued.
  const settle = (n) => Promise.all(FS.pending).then(() => (FS.pending.length > n ? settle(FS.pending.length) : ready()));
  settle(FS.pending.length);
})();
