// Compiled modules (issue 51), as XProf's memory viewer shows them: for an XProf capture or an
// XLA module, one view per module — its buffers in program order with their logical and padded
// sizes, layout tile, kind (parameter, output, temporary, alias, ...) and offset — and, for each
// heap-simulator trace, the heap drawn twice side by side: XLA's plan (where its buffer
// assignment put each buffer) and fragsim's static-heap plan of the same buffers (x: program
// order, y: offset; a buffer is a box from its allocation to its free). fragsim read the modules
// and planned them (run.modules: sim/commands/module_plans.h); this file lays them out. A third
// plan (the best one another pass finds) goes where run.modules carries it: each heap's planned
// bytes and each buffer's planned offset are the slots it fills.
"use strict";
(function () {
  const FS = window.FS, data = FS.data, el = FS.el, bytes = FS.bytes;
  const runs = data.runs.filter((r) => r.modules && r.modules.length);
  const box = document.getElementById("modules");
  if (!runs.length || !box) return;
  box.appendChild(el("h2", {}, "Compiled modules"));
  const B = { id: 0, name: 1, shape: 2, logical: 3, padded: 4, tile: 5, kind: 6, allocation: 7, offset: 8, trace: 9,
    order: 10, end: 11, planned: 12 };
  const KIND_COLORS = { parameter: "#4e79a7", output: "#59a14f", temporary: "#f28e2c", constant: "#9c755f",
    "thread-local": "#bab0ab" };
  const kindColor = (k) => (k.startsWith("alias") ? "#af7aa1" : k.startsWith("parameter") ? KIND_COLORS.parameter
                                                                                          : KIND_COLORS[k] || "#76b7b2");

  // One heap's plan: boxes [order, end) × [offset, offset + padded] of its buffers.
  function plan(target, title, bufs, offsetOf, heap, events) {
    const wrap = el("div", { class: "moduleplan" });
    wrap.appendChild(el("div", { class: "maptitle" }, title + (heap ? ": heap " + bytes(heap) : "")));
    const W = 440, H = 220, L = 64, T = 6, Bm = 18;
    const c = el("canvas", { class: "plan", width: W, height: H });
    c.style.border = "1px solid #ccc";
    wrap.appendChild(c);
    target.appendChild(wrap);
    const ctx = c.getContext("2d");
    const placed = bufs.filter((b) => offsetOf(b) >= 0);
    const top = Math.max(1, heap || 0, ...placed.map((b) => offsetOf(b) + b[B.padded]));
    const xs = (o) => L + (o / Math.max(1, events)) * (W - L - 4);
    const ys = (v) => H - Bm - (v / top) * (H - T - Bm);
    ctx.fillStyle = "#fff";
    ctx.fillRect(0, 0, W, H);
    const boxes = [];
    placed.forEach((b) => {
      const from = Math.max(0, b[B.order]), to = b[B.end] >= 0 ? b[B.end] : events;
      const x0 = xs(from), x1 = Math.max(x0 + 1, xs(to)), y1 = ys(offsetOf(b)), y0 = Math.min(y1 - 1, ys(offsetOf(b) + b[B.padded]));
      ctx.fillStyle = kindColor(b[B.kind]);
      ctx.fillRect(x0, y0, x1 - x0, y1 - y0);
      ctx.strokeStyle = "rgba(0,0,0,0.35)";
      ctx.strokeRect(x0, y0, x1 - x0, y1 - y0);
      boxes.push([x0, x1, y0, y1, b]);
    });
    ctx.fillStyle = "#555";
    ctx.font = "10px sans-serif";
    ctx.textAlign = "right";
    FS.byteTicks(0, top, 4).forEach((v) => ctx.fillText(FS.byteTick(v), L - 4, ys(v) + 3));
    ctx.textAlign = "center";
    FS.ticks(0, events, 4, true).forEach((v) => ctx.fillText(String(v), xs(v), H - 5));
    c.addEventListener("mousemove", (evt) => {
      const rect = c.getBoundingClientRect();
      const x = ((evt.clientX - rect.left) / rect.width) * W, y = ((evt.clientY - rect.top) / rect.height) * H;
      const hit = boxes.filter(([x0, x1, y0, y1]) => x >= x0 && x < x1 && y >= y0 && y < y1).pop();
      if (!hit) { FS.hideTip(); return; }
      const b = hit[4];
      FS.showTip(evt, [b[B.name] + (b[B.shape] ? "  " + b[B.shape] : ""), b[B.kind] + ", offset " + bytes(offsetOf(b)),
        "logical " + bytes(b[B.logical]) + ", padded " + bytes(b[B.padded]) + (b[B.tile] ? ", tile " + b[B.tile] : ""),
        "live from program step " + Math.max(0, b[B.order]) + (b[B.end] >= 0 ? " to " + b[B.end] : " to the end")]);
    });
    c.addEventListener("mouseleave", FS.hideTip);
    return boxes.length;
  }
  function view(r, m, target) {
    while (target.firstChild) target.removeChild(target.firstChild);
    const bufs = m.buffers;
    target.appendChild(el("div", { class: "note" }, m.module_name + ": " + bufs.length + " buffers" +
      (m.truncated ? " (the first ones: the page lists at most that many)" : "") + " in " + m.allocations.length +
      " allocations; " + m.heap_events + " heap-simulator events" + (m.planned_by ? "; planned again by fragsim's " +
      m.planned_by : "")));
    // The plans, heap trace by heap trace: XLA's and fragsim's side by side.
    m.heaps.forEach(([trace, xla, planned]) => {
      const mine = bufs.filter((b) => b[B.trace] === trace);
      const events = Math.max(1, ...mine.map((b) => Math.max(b[B.order], b[B.end]) + 1));
      const row = el("div", { class: "planrow" });
      row.style.display = "flex";
      row.style.gap = "12px";
      row.style.flexWrap = "wrap";
      target.appendChild(el("div", { class: "maptitle" }, "heap-simulator trace " + trace + " (" + mine.length +
        " buffers): XLA's plan " + bytes(xla) + (planned ? ", fragsim's " + bytes(planned) + " (" +
        (planned <= xla ? "−" : "+") + bytes(Math.abs(planned - xla)) + ")" : "")));
      target.appendChild(row);
      const drawn = plan(row, "XLA's buffer assignment", mine, (b) => b[B.offset], xla, events);
      row.setAttribute("data-xla-boxes", String(drawn));
      if (planned) {
        const n = plan(row, "fragsim " + m.planned_by, mine, (b) => b[B.planned], planned, events);
        row.setAttribute("data-planned-boxes", String(n));
      } else {
        row.appendChild(el("div", { class: "note" }, "no fragsim plan of this heap"));
      }
    });
    // Every buffer in program order.
    const t = el("table", { class: "module-buffers" });
    const hr = el("tr");
    ["step", "buffer", "shape", "logical", "padded", "tile", "kind", "allocation", "offset", "fragsim's offset"]
      .forEach((h) => hr.appendChild(el("th", {}, h)));
    t.appendChild(hr);
    bufs.forEach((b) => {
      const row = el("tr", { class: "module-buffer" });
      [b[B.order] >= 0 ? String(b[B.order]) : "—", b[B.name], b[B.shape], b[B.logical] ? bytes(b[B.logical]) : "",
       bytes(b[B.padded]), b[B.tile], b[B.kind], b[B.allocation] >= 0 ? String(b[B.allocation]) : "",
       b[B.offset] >= 0 ? bytes(b[B.offset]) : "", b[B.planned] >= 0 ? bytes(b[B.planned]) : ""]
        .forEach((v, i) => row.appendChild(el("td", i === 1 || i === 6 ? { class: "l" } : {}, v)));
      t.appendChild(row);
    });
    target.appendChild(t);
  }
  runs.forEach((r) => {
    const wrap = el("div", { class: "modulebox" });
    if (data.runs.length > 1) wrap.appendChild(el("h3", {}, FS.runName(r)));
    const pick = el("select", { class: "module-select" });
    r.modules.forEach((m, i) => pick.appendChild(el("option", { value: i }, m.name + " (" + m.buffers.length + " buffers)")));
    wrap.appendChild(pick);
    const target = el("div", { class: "module" });
    wrap.appendChild(target);
    box.appendChild(wrap);
    pick.addEventListener("change", () => view(r, r.modules[pick.value], target));
    // The first module with a heap to draw.
    const first = Math.max(0, r.modules.findIndex((m) => m.heaps.length));
    pick.value = first;
    view(r, r.modules[first], target);
  });
  box.appendChild(el("p", { class: "note" },
    "Each module's buffers as XLA assigned them, in program order (the step: the buffer's allocation in its heap " +
    "simulation; — for one placed outside it). Logical: the bytes of its shape; padded: what XLA gave it on the device " +
    "(its layout's tiles round it up). The plans: x is the program step, y the offset in the heap; colours by kind " +
    "(blue parameter, green output, orange temporary, violet alias)."));
})();
