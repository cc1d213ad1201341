// fragsim's interactive report viewer: reads the JSON embedded in the page (#fragsim-data) and
// draws memory over time (one chart per run, shared zoom, hover), the address maps at the peak and
// at OOMs (hover a block: its buffer, shape, padding and stack), and every OOM. Written for this
// project; no library, no network: the HTML file is the whole report.
"use strict";
(function () {
  const errors = document.getElementById("errors");
  window.addEventListener("error", (e) => {
    errors.textContent += "error: " + e.message + "\n";
  });
  const data = JSON.parse(document.getElementById("fragsim-data").textContent);
  const tip = document.getElementById("tooltip");
  const COLORS = { requested: "#888", allocated: "#1f77b4", reserved: "#ff7f0e", capacity: "#d62728", limit: "#9467bd" };

  function bytes(b) {
    const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let v = b, u = 0;
    while (v >= 1024 && u < units.length - 1) { v /= 1024; u++; }
    return u === 0 ? b + " B" : v.toFixed(2) + " " + units[u];
  }
  function pct(f) { return (100 * f).toFixed(1) + "%"; }
  function el(tag, attrs, text) {
    const e = document.createElement(tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function svg(tag, attrs) {
    const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    return e;
  }
  function showTip(evt, lines) {
    tip.textContent = lines.join("\n");
    tip.style.display = "block";
    const x = Math.min(evt.clientX + 14, window.innerWidth - tip.offsetWidth - 8);
    tip.style.left = x + window.scrollX + "px";
    tip.style.top = evt.clientY + 14 + window.scrollY + "px";
  }
  function hideTip() { tip.style.display = "none"; }

  // ---- summary ----
  const summary = document.getElementById("summary");
  const table = el("table", { class: "summary" });
  const head = ["policy", "result", "OOMs", "peak requested", "peak allocated", "peak reserved",
                "reserved but unallocated at peak allocated", "external fragmentation at peak allocated",
                "external fragmentation max"];
  const tr = el("tr");
  head.forEach((h) => tr.appendChild(el("th", {}, h)));
  table.appendChild(tr);
  data.runs.forEach((r) => {
    const row = el("tr");
    [r.label, r.completed ? "ok" : "OOM", r.ooms.length + (r.oom_count > r.ooms.length ? "+" : ""),
     bytes(r.peak_requested), bytes(r.peak_allocated), bytes(r.peak_reserved),
     bytes(r.unused_at_peak) + " (" + pct(r.unused_share_at_peak) + ")", pct(r.external_at_peak), pct(r.external_max)]
      .forEach((v, i) => row.appendChild(el("td", { class: i === 1 && !r.completed ? "bad" : "" }, String(v))));
    table.appendChild(row);
  });
  summary.appendChild(table);
  summary.appendChild(el("p", { class: "note" },
    "Reserved but unallocated: memory the allocator holds and no buffer uses. External fragmentation: " +
    "1 − largest free block / free memory, of the reserved memory. Both at the moment allocated memory peaked " +
    "(docs/metrics.md)."));

  // ---- memory over time: one chart per run, one shared x range ----
  const charts = document.getElementById("charts");
  const maxEvent = Math.max(1, ...data.runs.map((r) => r.events));
  const view = { x0: 0, x1: maxEvent };
  const yMax = Math.max(1, ...data.runs.map((r) => Math.max(r.peak_reserved, r.peak_requested, r.capacity || 0, r.limit || 0)));
  const W = 900, H = 210, L = 70, R = 10, T = 10, B = 24;
  const redraws = [];
  function lower(points, x) {  // first point with event_index >= x
    let lo = 0, hi = points.length;
    while (lo < hi) { const m = (lo + hi) >> 1; if (points[m][0] < x) lo = m + 1; else hi = m; }
    return lo;
  }
  data.runs.forEach((r, ri) => {
    const box = el("div", { class: "chartbox" });
    box.appendChild(el("h3", {}, r.label + " — " + (r.completed ? "completed" : r.oom_count + " OOM" + (r.oom_count === 1 ? "" : "s"))));
    const s = svg("svg", { class: "chart", viewBox: "0 0 " + W + " " + H, width: "100%", "data-run": ri });
    box.appendChild(s);
    charts.appendChild(box);
    const plot = svg("g");
    s.appendChild(plot);
    const cursor = svg("line", { class: "cursor", y1: T, y2: H - B, stroke: "#444", "stroke-dasharray": "2,2", visibility: "hidden" });
    const sel = svg("rect", { class: "selection", y: T, height: H - T - B, fill: "rgba(31,119,180,0.15)", visibility: "hidden" });
    s.appendChild(sel);
    s.appendChild(cursor);
    const xs = (x) => L + ((x - view.x0) / Math.max(1, view.x1 - view.x0)) * (W - L - R);
    const ys = (y) => H - B - (y / yMax) * (H - T - B);
    function draw() {
      while (plot.firstChild) plot.removeChild(plot.firstChild);
      for (let i = 0; i <= 4; i++) {  // y grid
        const v = (yMax * i) / 4;
        plot.appendChild(svg("line", { x1: L, x2: W - R, y1: ys(v), y2: ys(v), stroke: "#eee" }));
        const t = svg("text", { x: L - 4, y: ys(v) + 4, "text-anchor": "end", class: "axis" });
        t.textContent = bytes(Math.round(v));
        plot.appendChild(t);
      }
      for (let i = 0; i <= 5; i++) {  // x axis: event index
        const v = view.x0 + ((view.x1 - view.x0) * i) / 5;
        const t = svg("text", { x: xs(v), y: H - 6, "text-anchor": i === 0 ? "start" : i === 5 ? "end" : "middle", class: "axis" });
        t.textContent = Math.round(v).toLocaleString();
        plot.appendChild(t);
      }
      [["capacity", r.capacity], ["limit", r.limit]].forEach(([k, v]) => {
        if (!v) return;
        plot.appendChild(svg("line", { x1: L, x2: W - R, y1: ys(v), y2: ys(v), stroke: COLORS[k], "stroke-dasharray": "6,3", class: "line-" + k }));
        const t = svg("text", { x: W - R - 4, y: ys(v) - 3, "text-anchor": "end", class: "axis", fill: COLORS[k] });
        t.textContent = k + " " + bytes(v);
        plot.appendChild(t);
      });
      r.marks.forEach((m) => {
        if (m[0] < view.x0 || m[0] > view.x1) return;
        const line = svg("line", { x1: xs(m[0]), x2: xs(m[0]), y1: T, y2: H - B, stroke: "#bbb", class: "mark" });
        const title = svg("title");
        title.textContent = m[1];
        line.appendChild(title);
        plot.appendChild(line);
      });
      const a = Math.max(0, lower(r.timeline, view.x0) - 1), b = Math.min(r.timeline.length, lower(r.timeline, view.x1) + 1);
      ["requested", "allocated", "reserved"].forEach((k, idx) => {
        let d = "";
        for (let i = a; i < b; i++) {
          const p = r.timeline[i];
          d += (d ? "L" : "M") + xs(p[0]).toFixed(1) + "," + ys(p[idx + 1]).toFixed(1);
        }
        plot.appendChild(svg("path", { d: d, fill: "none", stroke: COLORS[k], "stroke-width": 1.5, class: "series-" + k }));
      });
      r.ooms.forEach((o) => {
        if (o.event_index < view.x0 || o.event_index > view.x1) return;
        const c = svg("circle", { cx: xs(o.event_index), cy: ys(o.allocated), r: 4, fill: COLORS.capacity, class: "oom-marker" });
        const title = svg("title");
        title.textContent = "OOM at event " + o.event_index + ": " + (o.name || "id " + o.id) + " " + bytes(o.requested);
        c.appendChild(title);
        plot.appendChild(c);
      });
    }
    redraws.push(draw);
    const toX = (evt) => {
      const rect = s.getBoundingClientRect();
      const px = ((evt.clientX - rect.left) / rect.width) * W;
      return view.x0 + ((px - L) / (W - L - R)) * (view.x1 - view.x0);
    };
    let dragFrom = null;
    s.addEventListener("mousedown", (evt) => { dragFrom = toX(evt); });
    s.addEventListener("mousemove", (evt) => {
      const x = toX(evt);
      if (x < view.x0 || x > view.x1) { hideTip(); cursor.setAttribute("visibility", "hidden"); return; }
      cursor.setAttribute("x1", xs(x));
      cursor.setAttribute("x2", xs(x));
      cursor.setAttribute("visibility", "visible");
      if (dragFrom !== null) {
        sel.setAttribute("x", Math.min(xs(dragFrom), xs(x)));
        sel.setAttribute("width", Math.abs(xs(x) - xs(dragFrom)));
        sel.setAttribute("visibility", "visible");
      }
      const i = Math.min(r.timeline.length - 1, lower(r.timeline, x));
      if (i < 0 || !r.timeline.length) return;
      const p = r.timeline[i];
      let mark = "";
      r.marks.forEach((m) => { if (m[0] <= p[0]) mark = m[1]; });
      showTip(evt, [r.label, "event " + p[0].toLocaleString() + (mark ? "  (after mark: " + mark + ")" : ""),
        "requested " + bytes(p[1]), "allocated " + bytes(p[2]), "reserved  " + bytes(p[3]),
        "external fragmentation " + pct(p[4])]);
    });
    s.addEventListener("mouseleave", () => { hideTip(); cursor.setAttribute("visibility", "hidden"); });
    s.addEventListener("mouseup", (evt) => {
      const x = toX(evt);
      sel.setAttribute("visibility", "hidden");
      if (dragFrom !== null && Math.abs(x - dragFrom) > (view.x1 - view.x0) / 200) {
        view.x0 = Math.max(0, Math.min(dragFrom, x));
        view.x1 = Math.min(maxEvent, Math.max(dragFrom, x));
        redraws.forEach((f) => f());
      }
      dragFrom = null;
    });
    s.addEventListener("dblclick", () => { view.x0 = 0; view.x1 = maxEvent; redraws.forEach((f) => f()); });
    s.addEventListener("wheel", (evt) => {
      evt.preventDefault();
      const x = toX(evt), k = evt.deltaY > 0 ? 1.25 : 0.8;
      view.x0 = Math.max(0, x - (x - view.x0) * k);
      view.x1 = Math.min(maxEvent, x + (view.x1 - x) * k);
      redraws.forEach((f) => f());
    }, { passive: false });
    draw();
  });
  charts.appendChild(el("p", { class: "note" },
    "Drag across a chart to zoom (all charts follow), scroll to zoom around the cursor, double-click to reset. " +
    "Grey: requested, blue: allocated, orange: reserved; dashed: device capacity and the allocator's limit; " +
    "vertical lines: the trace's marks; red dots: OOMs."));

  // ---- address maps at the peak and at OOMs ----
  const maps = document.getElementById("maps");
  function hashColor(s) {
    let h = 0;
    for (let i = 0; i < s.length; i++) h = (h * 31 + s.charCodeAt(i)) | 0;
    return "hsl(" + (Math.abs(h) % 360) + ",55%,55%)";
  }
  function drawMoment(r, m, target) {
    while (target.firstChild) target.removeChild(target.firstChild);
    const byAddr = new Map();
    m.buffers.forEach((b) => byAddr.set(b.addr, b));
    m.spaces.forEach((sp) => {
      target.appendChild(el("div", { class: "maptitle" },
        "device " + sp.device + " " + sp.space + ": " + bytes(sp.allocated) + " allocated of " + bytes(sp.reserved) +
        " reserved; reserved but unallocated " + bytes(sp.unused) + " (" + pct(sp.unused_share) + "); external fragmentation " +
        pct(sp.external) + (sp.truncated ? " (map truncated)" : "")));
      // Regions in address order, laid end to end and wrapped into rows of equal bytes: a few big
      // regions (BFC, a static heap) get a row each, a thousand segments share a few dozen rows.
      const total = sp.regions.reduce((a, g) => a + g[1], 0);
      if (!total) return;
      const rows = sp.regions.length <= 8 ? sp.regions.length : Math.min(40, Math.ceil(Math.sqrt(sp.regions.length) * 1.5));
      const perRow = total / rows, RH = 22, GAP = 4;
      const starts = [];  // packed offset of each region
      let acc = 0;
      sp.regions.forEach((g) => { starts.push(acc); acc += g[1]; });
      const regionIndex = new Map();
      sp.regions.forEach((g, i) => regionIndex.set(g[2], i));
      target.appendChild(el("div", { class: "regionlabel" }, sp.regions.length + " region" + (sp.regions.length === 1 ? "" : "s") +
        " from " + sp.regions[0][0] + ", " + bytes(total) + (rows > 1 ? "; each row " + bytes(Math.round(perRow)) : "") +
        ". Coloured: buffers in use; white: free; grey: reserved but unmapped; dark ticks: region starts."));
      const c = el("canvas", { class: "map", width: 900, height: rows * (RH + GAP), "data-space": sp.device + "/" + sp.space });
      c.style.height = rows * (RH + GAP) + "px";
      target.appendChild(c);
      const ctx = c.getContext("2d");
      const W2 = c.width;
      function paint(p0, len, color) {  // packed byte range, wrapped over rows
        let p = p0;
        const e = p0 + len;
        while (p < e) {
          const row = Math.min(rows - 1, Math.floor(p / perRow));
          const rowEnd = Math.min(e, (row + 1) * perRow);
          const x0 = ((p - row * perRow) / perRow) * W2, x1 = ((rowEnd - row * perRow) / perRow) * W2;
          ctx.fillStyle = color;
          ctx.fillRect(x0, row * (RH + GAP), Math.max(1, x1 - x0), RH);
          if (rowEnd <= p) break;
          p = rowEnd;
        }
      }
      ctx.fillStyle = "#fafafa";
      ctx.fillRect(0, 0, c.width, c.height);
      paint(0, total, "#e6e6e6");
      const packed = [];  // [packed start, block]
      sp.blocks.forEach((b) => {
        const i = regionIndex.get(b[4]);
        if (i === undefined) return;
        const p = starts[i] + b[0];
        packed.push([p, b]);
        const buf = byAddr.get(b[5]);
        paint(p, b[1], !b[3] ? "#e6e6e6" : b[2] ? (buf ? hashColor(buf.name || String(buf.id)) : "#5a7") : "#ffffff");
      });
      if (sp.regions.length > 1) starts.forEach((p) => paint(p, Math.max(1, perRow / W2), "#333"));
      c.addEventListener("mousemove", (evt) => {
        const rect = c.getBoundingClientRect();
        const row = Math.floor(((evt.clientY - rect.top) / rect.height) * rows);
        const p = row * perRow + ((evt.clientX - rect.left) / rect.width) * perRow;
        let lo = 0, hi = packed.length;  // last block starting at or before p
        while (lo < hi) { const mid = (lo + hi) >> 1; if (packed[mid][0] <= p) lo = mid + 1; else hi = mid; }
        const hit = lo > 0 && p < packed[lo - 1][0] + packed[lo - 1][1][1] ? packed[lo - 1][1] : null;
        if (!hit) { hideTip(); return; }
        const g = sp.regions[regionIndex.get(hit[4])];
        const lines = [(hit[2] ? "in use" : hit[3] ? "free" : "unmapped") + " block at " + hit[5] + ", " + bytes(hit[1]),
          "region " + g[2] + " at " + g[0] + " (" + bytes(g[1]) + "), offset " + bytes(hit[0])];
        const buf = byAddr.get(hit[5]);
        if (hit[2] && buf) {
          lines.push((buf.name || "id " + buf.id) + (buf.shape ? " " + buf.shape : ""));
          lines.push("requested " + bytes(buf.requested) + (buf.block > buf.requested ? ", padding/rounding " + bytes(buf.block - buf.requested) : ""));
          lines.push("allocated at event " + buf.event_index);
          (data.stacks[buf.stack] || []).slice(0, 12).forEach((f) => lines.push("  " + f));
        }
        showTip(evt, lines);
      });
      c.addEventListener("mouseleave", hideTip);
    });
    if (m.top.length) {
      const t = el("table", { class: "buffers" });
      const hr = el("tr");
      ["block", "requested", "padding", "buffer", "shape", "allocated at event", "frame"].forEach((h) => hr.appendChild(el("th", {}, h)));
      t.appendChild(hr);
      m.top.forEach((b) => {
        const row = el("tr");
        [bytes(b.block), bytes(b.requested), bytes(Math.max(0, b.block - b.requested)), b.name || "id " + b.id, b.shape || "",
         String(b.event_index), (data.stacks[b.stack] || [""])[0]].forEach((v) => row.appendChild(el("td", {}, v)));
        t.appendChild(row);
      });
      target.appendChild(el("div", { class: "maptitle" }, "largest live buffers (" + m.top.length + " of " + m.live_buffers + ")"));
      target.appendChild(t);
    }
  }
  data.runs.forEach((r) => {
    if (!r.moments.length) return;
    const box = el("div", { class: "mapbox" });
    box.appendChild(el("h3", {}, r.label + ": address map"));
    const pick = el("select", { class: "moment-select" });
    r.moments.forEach((m, i) => pick.appendChild(el("option", { value: i }, m.title)));
    box.appendChild(pick);
    const target = el("div", { class: "moment" });
    box.appendChild(target);
    maps.appendChild(box);
    pick.addEventListener("change", () => drawMoment(r, r.moments[pick.value], target));
    drawMoment(r, r.moments[0], target);
  });

  // ---- every OOM ----
  const oomsDiv = document.getElementById("ooms");
  data.runs.forEach((r) => {
    if (!r.ooms.length) return;
    oomsDiv.appendChild(el("h3", {}, r.label + ": " + r.oom_count + " OOM" + (r.oom_count === 1 ? "" : "s")));
    const t = el("table", { class: "oom-table" });
    const hr = el("tr");
    ["event", "device", "request", "shape", "requested", "rounded/padded", "allocated", "free", "largest free", "cause", "frame"]
      .forEach((h) => hr.appendChild(el("th", {}, h)));
    t.appendChild(hr);
    r.ooms.forEach((o) => {
      const row = el("tr", { class: "oom-row" });
      [String(o.event_index), o.device + " " + o.space, o.name || "id " + o.id, o.shape || "", bytes(o.requested),
       bytes(o.rounded), bytes(o.allocated), bytes(o.free), bytes(o.largest_free), o.cause, (data.stacks[o.stack] || [""])[0]]
        .forEach((v) => row.appendChild(el("td", {}, v)));
      t.appendChild(row);
    });
    oomsDiv.appendChild(t);
    if (r.oom_count > r.ooms.length) oomsDiv.appendChild(el("p", { class: "note" }, (r.oom_count - r.ooms.length) + " more in the JSON report"));
    if (r.explanation) oomsDiv.appendChild(el("pre", { class: "explanation" }, r.explanation));
  });
  document.body.setAttribute("data-ready", "1");
})();
