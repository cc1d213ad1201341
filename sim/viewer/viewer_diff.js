// `fragsim diff --html` (issue 24): what changed between run A and run B, above the two runs
// (whose timelines below share one x axis). Every figure is the diff's own (sim/diff.cpp,
// fragsim_diff 1): the headline, per device and space A, B and the change, the first OOMs, the
// live bytes at each run's peak by call site and by stack frame side by side, and the largest
// buffers added, removed, grown or shrunk. This file only lays them out.
"use strict";
(function () {
  const FS = window.FS, d = FS.data.diff, el = FS.el, bytes = FS.bytes;
  if (!d) return;
  const box = document.getElementById("diff");
  box.appendChild(el("h2", {}, "What changed from A to B"));
  const who = el("ul", { class: "lines" });
  [["A", d.a], ["B", d.b]].forEach(([k, s]) => {
    who.appendChild(el("li", {}, k + ": " + s.name + " — " + s.policy + " on " + s.hardware + ", " + s.events +
      " events, peak at event " + (s.peak_event === null ? "?" : s.peak_event)));
  });
  box.appendChild(who);
  const head = el("ul", { class: "lines", id: "diff-headline" });
  d.headline.forEach((h) => head.appendChild(el("li", { class: "advice" }, h)));
  box.appendChild(head);

  function signed(v) { return (v < 0 ? "−" : v > 0 ? "+" : "±") + bytes(Math.abs(v)); }
  function table(headers, rows, cls) {
    const t = el("table", { class: cls || "" }), tr = el("tr");
    headers.forEach((h) => tr.appendChild(el("th", {}, h)));
    t.appendChild(tr);
    rows.forEach((r) => {
      const row = el("tr");
      r.forEach((c, i) => row.appendChild(el("td", { class: i === r.length - 1 && typeof c === "string" ? "l" : "n" }, String(c))));
      t.appendChild(row);
    });
    return t;
  }

  // Per device and space: A, B and the change.
  const val = (x, k, f) => (x === null || x === undefined ? "-" : f(x[k]));
  box.appendChild(el("h3", {}, "Per device and space"));
  box.appendChild(table(["device", "peak allocated A", "B", "change", "peak reserved A", "B", "change",
    "reserved unused at peak A", "B", "ext. fragmentation at peak A", "B", "OOMs A", "B", "peak event A", "B"],
  d.devices.map((r) => [r.device + " " + r.space,
    val(r.a, "peak_allocated_bytes", bytes), val(r.b, "peak_allocated_bytes", bytes),
    r.change ? signed(r.change.peak_allocated_bytes) : "-",
    val(r.a, "peak_reserved_bytes", bytes), val(r.b, "peak_reserved_bytes", bytes),
    r.change ? signed(r.change.peak_reserved_bytes) : "-",
    val(r.a, "reserved_unallocated_bytes", bytes), val(r.b, "reserved_unallocated_bytes", bytes),
    val(r.a, "external_fragmentation", FS.pct), val(r.b, "external_fragmentation", FS.pct),
    val(r.a, "oom_count", String), val(r.b, "oom_count", String),
    val(r.a, "peak_event", String), val(r.b, "peak_event", String)]), "diff-devices"));

  const oom = (o) => (o === null ? "none" : "event " + o.event_index + " on device " + o.device + " " + o.space + ": " +
    bytes(o.requested_bytes) + " " + o.cause + (o.request ? " (" + o.request + ")" : ""));
  box.appendChild(el("p", {}, "First OOM — A: " + oom(d.first_oom.a) + "; B: " + oom(d.first_oom.b) + " (" +
    d.first_oom.change + ")"));

  // Live bytes at each run's peak (and first OOM) by call site and by frame, A against B.
  function attribution(title, at) {
    box.appendChild(el("h3", {}, title + " (A event " + at.a_event + ", B event " + at.b_event + "): live bytes " +
      bytes(at.a_live_bytes) + " → " + bytes(at.b_live_bytes) + " (" + signed(at.change_bytes) + ")"));
    const rows = (list, key) => list.map((r) => [signed(r.change_bytes), bytes(r.a_bytes), bytes(r.b_bytes),
      r.a_buffers, r.b_buffers, r.change, r[key]]);
    if (at.sites.length)
      box.appendChild(table(["change", "A", "B", "buffers A", "B", "", "call site"], rows(at.sites, "site"), "diff-sites"));
    if (at.frames.length)
      box.appendChild(table(["change", "A", "B", "buffers A", "B", "", "stack frame"], rows(at.frames, "frame"),
        "diff-frames"));
  }
  attribution("At each run's peak", d.at_peak);
  if (d.at_first_oom) attribution("At each run's first OOM", d.at_first_oom);

  const bs = d.buffers;
  ["added", "removed", "grown", "shrunk"].forEach((k) => {
    if (!bs[k].length) return;
    box.appendChild(el("h3", {}, "Among the largest buffers at each peak, " + k + " in B"));
    box.appendChild(table(["block", "was", "buffer", "shape", "frame"], bs[k].map((b) => [bytes(b.block_bytes),
      b.a_block_bytes === undefined ? "" : bytes(b.a_block_bytes), b.name || "id " + b.id,
      b.shape ? (b.dtype || "") + JSON.stringify(b.shape) : "", b.frame || ""])));
  });
  if (bs.unknown) box.appendChild(el("p", { class: "note" }, bs.unknown_note + "."));
  // Reports diffed as they are carry no history: only a diff of traces has charts below.
  const charted = FS.data.runs.some((r) => r.timelines.length);
  box.appendChild(el("p", { class: "note" }, bs.note + (charted ? ". Below: both runs, their timelines on one x axis."
    : ". These are two reports, which keep no timelines or address maps: diff the traces " +
      "(fragsim diff TRACE_A TRACE_B --html) for both runs' charts.")));
})();
