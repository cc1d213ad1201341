// The end of the viewer: what #probe found, and the page marked ready (the tests wait for it).
"use strict";
(function () {
  const FS = window.FS;
  if (FS.probing) document.getElementById("probe").textContent = FS.probeOut.map((o) => JSON.stringify(o)).join("\n");
  document.body.setAttribute("data-ready", "1");
})();
