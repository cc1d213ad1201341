// fragsim's interactive report viewer: reads the JSON embedded in the page (#fragsim-data) — each
// run's fragsim report (every figure), its per-space timelines and the memory maps of its moments —
// and draws: what fragsim found (notes, advice, fidelity, the allocator's own message, in full);
// a summary per run and per device and space; memory over time, one chart per device and space
// with the runs of a compare overlaid (or as small multiples), y axes fitted to the data with the
// device's capacity as a line or a marked value above; the trace's marks; the address maps at each
// space's peak and at OOMs (hover a block: its buffer and stack); every OOM. Written for this
// project; no library, no network: the HTML file is the whole report. #probe in the URL makes it
// hover points across every chart and map and write what it found into #probe (the tests read it).
"use strict";
(function () {
  const errors = document.getElementById("errors");
  window.addEventListener("error", (e) => {
    errors.textContent += "error: " + e.message + "\n";
  });
  const data = JSON.parse(document.getElementById("fragsim-data").textContent);
  const tip = document.getElementById("tooltip");
  const COLORS = { requested: "#888", allocated: "#1f77b4", reserved: "#ff7f0e", capacity: "#d62728", limit: "#9467bd" };
  const RUN_COLORS = ["#1f77b4", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#ff7f0e", "#7f7f7f"];

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
  function at(obj, path) {  // a JSON pointer into a run's report
    return path.split("/").slice(1).reduce((o, k) => (o === undefined ? o : o[k]), obj);
  }
  const where = (d) => "device " + d.device + " " + d.space;
  const keyOf = (d) => d.device + "/" + d.space;
  const runName = (r) => r.label;
  // Text with `code` spans, as advice quotes commands.
  function withCode(text) {
    const li = el("li");
    text.split("`").forEach((part, i) => li.appendChild(i % 2 ? el("code", {}, part) : document.createTextNode(part)));
    return li;
  }
  function hashColor(s) {
    let h = 0;
    for (let i = 0; i < s.length; i++) h = (h * 31 + s.charCodeAt(i)) | 0;
    return "hsl(" + (Math.abs(h) % 360) + ",55%,55%)";
  }
  // What the other views (sim/viewer_*.js, after this file) share with this one.
  const FS = window.FS = { data: data, bytes: bytes, pct: pct, el: el, svg: svg, showTip: showTip, hideTip: hideTip,
    at: at, where: where, keyOf: keyOf, runName: runName, withCode: withCode, hashColor: hashColor, tip: tip,
    probing: location.hash === "#probe", probeOut: [], redraws: [] };

  // ---- what fragsim found: notes, advice, fidelity, in full ----
  const findings = document.getElementById("findings");
  data.runs.forEach((r) => {
    const rep = r.report, lines = el("ul", { class: "lines" });
    (rep.notes || []).forEach((n) => lines.appendChild(withCode("note: " + n)));
    (rep.advice || []).forEach((a) => {
      const li = withCode("advice: " + a);
      li.setAttribute("class", "advice");
      lines.appendChild(li);
    });
    if (rep.fidelity) {
      const f = rep.fidelity;
      lines.appendChild(el("li", { class: "fidelity" }, "fidelity: reproduced " + f.allocs_matched + "/" + f.allocs_compared +
        " recorded allocation addresses, " + f.segments_matched + "/" + f.segments_compared + " segment sizes"));
    }
    if (!lines.firstChild) return;
    findings.appendChild(el("h3", {}, runName(r)));
    findings.appendChild(lines);
  });

  // ---- summary: per run, and per device and space where a run has several ----
  const summary = document.getElementById("summary");
  const several = data.runs.some((r) => r.report.devices.length > 1);
  const table = el("table", { class: "summary" });
  const head = ["run"].concat(several ? ["device", "space"] : []).concat(["result", "OOMs", "usable memory",
    "peak requested", "peak allocated", "peak reserved", "reserved but unallocated at peak allocated",
    "external fragmentation at peak allocated", "external fragmentation max",
    "best static plan (fragmentation this allocator added: peak reserved − plan)"]);
  const tr = el("tr");
  head.forEach((h) => tr.appendChild(el("th", {}, h)));
  table.appendChild(tr);
  data.runs.forEach((r) => {
    const rep = r.report;
    rep.devices.forEach((d) => {
      const binds = rep.binding && rep.binding.device === d.device && rep.binding.space === d.space;
      const fr = d.fragmentation.at_peak_allocated;
      const result = d.completed ? "ok" : "OOM";
      const row = el("tr", { class: "summary-row" });
      [runName(r)].concat(several ? [String(d.device) + (binds ? " *" : ""), d.space] : []).concat([result, String(d.oom_count),
        bytes(d.usable_bytes), bytes(d.peak_requested_bytes), bytes(d.peak_allocated_bytes), bytes(d.peak_reserved_bytes),
        bytes(fr.reserved_unallocated_bytes) + " (" + pct(fr.reserved_unallocated_share) + ")", pct(fr.external),
        pct(d.fragmentation.max),
        d.waste && d.waste.plan_bytes !== undefined
          ? bytes(d.waste.plan_bytes) + (d.waste.plan_optimal ? " (optimal)" : "") + "; " + bytes(d.waste.fragmentation_bytes)
          : d.waste && d.waste.skipped ? "not made" : "-"])
        .forEach((v) => row.appendChild(el("td", v === "OOM" ? { class: "bad" } : {}, v)));
      table.appendChild(row);
    });
  });
  summary.appendChild(table);
  summary.appendChild(el("p", { class: "note" },
    "Each device and memory space at its own peak" + (several ? " (* the space that binds: the first OOM, else the " +
    "largest share of its memory)" : "") + ". Reserved but unallocated: memory the allocator holds and no buffer uses. " +
    "External fragmentation: 1 − largest free block / free memory, of the reserved memory (docs/metrics.md)."));

  // ---- memory over time: one chart per device and space, runs overlaid; one shared x range ----
  const charts = document.getElementById("charts");
  // The x range: the whole run, or the --from/--to window when every run was drawn for one (its
  // timelines hold that window's events only).
  const windows = data.runs.map((r) => (r.history && r.history.window ? [r.history.first, r.history.last] : null));
  const windowed = windows.length > 0 && windows.every((w) => w);
  const minEvent = windowed ? Math.min(...windows.map((w) => w[0])) : 0;
  const maxEvent = windowed ? Math.max(minEvent + 1, ...windows.map((w) => w[1]))
                            : Math.max(1, ...data.traces.map((t) => t.events));
  const view = { x0: minEvent, x1: maxEvent, capacity: false, multiples: false };
  const W = 900, H = 210, L = 70, R = 10, T = 14, B = 24;
  const redraws = [];
  function lower(points, x) {  // first point with event_index >= x
    let lo = 0, hi = points.length;
    while (lo < hi) { const m = (lo + hi) >> 1; if (points[m][0] < x) lo = m + 1; else hi = m; }
    return lo;
  }
  // (run, space) series of a chart: the run's timeline and report entry for that space.
  function seriesOf(r, key) {
    const tl = r.timelines.find((t) => keyOf(t) === key);
    const dev = r.report.devices.find((d) => keyOf(d) === key);
    return tl && dev ? { run: r, points: tl.points, dev: dev } : null;
  }
  const keys = [];
  data.runs.forEach((r) => r.timelines.forEach((t) => { if (!keys.includes(keyOf(t))) keys.push(keyOf(t)); }));
  function chart(title, series, overlaid, parent) {
    const box = el("div", { class: "chartbox" });
    box.appendChild(el("h3", {}, title));
    const s = svg("svg", { class: "chart", viewBox: "0 0 " + W + " " + H, width: "100%" });
    box.appendChild(s);
    const legend = el("div", { class: "legend" });
    if (overlaid)
      series.forEach((x, i) => {
        const sp = el("span", {}, "━ " + runName(x.run) + " (allocated solid, reserved dashed)");
        sp.style.color = RUN_COLORS[i % RUN_COLORS.length];
        legend.appendChild(sp);
      });
    box.appendChild(legend);
    const capNote = el("div", { class: "note capnote" });
    box.appendChild(capNote);
    parent.appendChild(box);
    const plot = svg("g");
    s.appendChild(plot);
    const cursor = svg("line", { class: "cursor", y1: T, y2: H - B, stroke: "#444", "stroke-dasharray": "2,2", visibility: "hidden" });
    const sel = svg("rect", { class: "selection", y: T, height: H - T - B, fill: "rgba(31,119,180,0.15)", visibility: "hidden" });
    s.appendChild(sel);
    s.appendChild(cursor);
    const dev0 = series[0].dev;
    const usable = dev0.usable_bytes, limit = Math.max(0, ...series.map((x) => x.dev.limit_bytes || 0));
    // The y axis fits the run's peaks, or within a window the highest point drawn.
    const dataMax = Math.max(1, ...series.map((x) => windowed
      ? x.points.reduce((m, p) => Math.max(m, p[1], p[2], p[3]), 0)
      : Math.max(x.dev.peak_reserved_bytes, x.dev.peak_requested_bytes, x.dev.peak_allocated_bytes)));
    let yMax = 1;
    const xs = (x) => L + ((x - view.x0) / Math.max(1, view.x1 - view.x0)) * (W - L - R);
    const ys = (y) => H - B - (Math.min(y, yMax) / yMax) * (H - T - B);
    function draw() {
      // The y axis fits the data; capacity and limit join it when asked, or when they are near.
      const lines = [["capacity", usable], ["limit", limit]].filter((v) => v[1]);
      yMax = dataMax * 1.08;
      lines.forEach(([, v]) => { if (view.capacity || v <= dataMax * 1.5) yMax = Math.max(yMax, v * 1.02); });
      const above = lines.filter(([, v]) => v > yMax);
      capNote.textContent = above.map(([k, v]) => k + " " + bytes(v) + " is above this chart").join("; ") +
        (above.length ? " (tick “y axis up to capacity” to include it)" : "");
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
      let labelY = null;  // the last line label's baseline: a label too close below it goes under its line
      let offscale = 0;   // off-scale arrows already drawn (each further one is drawn to their left)
      lines.forEach(([k, v]) => {
        if (v > yMax) {  // off scale: an arrow at the top
          const t = svg("text", { x: W - R - 4 - offscale, y: T - 2, "text-anchor": "end", class: "axis offscale-" + k, fill: COLORS[k] });
          t.textContent = "▲ " + k + " " + bytes(v);
          plot.appendChild(t);
          offscale += 8 * t.textContent.length;
          return;
        }
        plot.appendChild(svg("line", { x1: L, x2: W - R, y1: ys(v), y2: ys(v), stroke: COLORS[k], "stroke-dasharray": "6,3", class: "line-" + k }));
        let y = ys(v) - 3;
        if (labelY !== null && Math.abs(y - labelY) < 12) y = Math.max(y, labelY) + 12;
        labelY = y;
        const t = svg("text", { x: W - R - 4, y: y, "text-anchor": "end", class: "axis label-" + k, fill: COLORS[k] });
        t.textContent = k + " " + bytes(v);
        plot.appendChild(t);
      });
      const drawnMarks = new Set();
      series.forEach((x) => (x.run.report.marks || []).forEach((m) => {
        if (m.event_index < view.x0 || m.event_index > view.x1 || drawnMarks.has(m.event_index)) return;
        drawnMarks.add(m.event_index);
        const line = svg("line", { x1: xs(m.event_index), x2: xs(m.event_index), y1: T, y2: H - B, stroke: "#bbb", class: "mark" });
        const title = svg("title");
        title.textContent = m.name;
        line.appendChild(title);
        plot.appendChild(line);
      }));
      const drawnRequested = new Set();
      series.forEach((x, si) => {
        const pts = x.points, a = Math.max(0, lower(pts, view.x0) - 1), b = Math.min(pts.length, lower(pts, view.x1) + 1);
        const color = RUN_COLORS[si % RUN_COLORS.length];
        ["requested", "allocated", "reserved"].forEach((k, idx) => {
          if (k === "requested" && overlaid && drawnRequested.has(x.run.trace)) return;  // the trace's, not the policy's
          drawnRequested.add(x.run.trace);
          let d = "";
          for (let i = a; i < b; i++) d += (d ? "L" : "M") + xs(pts[i][0]).toFixed(1) + "," + ys(pts[i][idx + 1]).toFixed(1);
          const attrs = { d: d, fill: "none", stroke: overlaid && k !== "requested" ? color : COLORS[k], "stroke-width": 1.5, class: "series-" + k };
          if (overlaid && k === "reserved") attrs["stroke-dasharray"] = "5,3";
          plot.appendChild(svg("path", attrs));
        });
        (x.dev.ooms || []).forEach((o) => {
          if (o.event_index < view.x0 || o.event_index > view.x1) return;
          const c = svg("circle", { cx: xs(o.event_index), cy: ys(o.allocated_bytes), r: 4, fill: overlaid ? color : COLORS.capacity, stroke: "#000", class: "oom-marker" });
          const title = svg("title");
          title.textContent = runName(x.run) + ": OOM at event " + o.event_index + ": " + (o.request.name || "id " + o.id) + " " + bytes(o.requested_bytes);
          c.appendChild(title);
          plot.appendChild(c);
        });
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
      const lines = [title + " — event " + Math.round(x).toLocaleString()];
      let mark = "";
      (series[0].run.report.marks || []).forEach((m) => { if (m.event_index <= x) mark = m.name; });
      if (mark) lines.push("after mark: " + mark);
      series.forEach((s2) => {
        const i = Math.min(s2.points.length - 1, lower(s2.points, x));
        if (i < 0) return;
        const p = s2.points[i];
        lines.push((overlaid ? runName(s2.run) + ": " : "") + "requested " + bytes(p[1]) + ", allocated " + bytes(p[2]) +
          ", reserved " + bytes(p[3]) + ", external fragmentation " + pct(p[4]));
      });
      showTip(evt, lines);
    });
    s.addEventListener("mouseleave", () => { hideTip(); cursor.setAttribute("visibility", "hidden"); });
    s.addEventListener("mouseup", (evt) => {
      const x = toX(evt);
      sel.setAttribute("visibility", "hidden");
      if (dragFrom !== null && Math.abs(x - dragFrom) > (view.x1 - view.x0) / 200) {
        view.x0 = Math.max(minEvent, Math.min(dragFrom, x));
        view.x1 = Math.min(maxEvent, Math.max(dragFrom, x));
        redraws.forEach((f) => f());
      }
      dragFrom = null;
    });
    s.addEventListener("dblclick", () => { view.x0 = minEvent; view.x1 = maxEvent; redraws.forEach((f) => f()); });
    s.addEventListener("wheel", (evt) => {
      evt.preventDefault();
      const x = toX(evt), k = evt.deltaY > 0 ? 1.25 : 0.8;
      view.x0 = Math.max(minEvent, x - (x - view.x0) * k);
      view.x1 = Math.min(maxEvent, x + (view.x1 - x) * k);
      redraws.forEach((f) => f());
    }, { passive: false });
    draw();
  }
  const controls = el("div", { class: "controls" });
  const capBox = el("input", { type: "checkbox", id: "cap" });
  controls.appendChild(capBox);
  controls.appendChild(el("label", { for: "cap" }, " y axis up to capacity  "));
  const multBox = el("input", { type: "checkbox", id: "mult" });
  if (data.runs.length > 1) {
    controls.appendChild(multBox);
    controls.appendChild(el("label", { for: "mult" }, " small multiples (one chart per run)"));
  }
  charts.appendChild(controls);
  const chartArea = el("div");
  charts.appendChild(chartArea);
  function drawCharts() {
    redraws.length = 0;
    while (chartArea.firstChild) chartArea.removeChild(chartArea.firstChild);
    keys.forEach((key) => {
      const all = data.runs.map((r) => seriesOf(r, key)).filter((x) => x);
      const name = key.replace("/", " ");
      if (view.multiples || all.length === 1)
        all.forEach((x) => chart((data.runs.length > 1 ? runName(x.run) + " — " : "") + "device " + name +
          (x.dev.oom_count ? " — " + x.dev.oom_count + " OOM" + (x.dev.oom_count === 1 ? "" : "s") : ""), [x], false, chartArea));
      else
        chart("device " + name + ": " + all.length + " runs", all, true, chartArea);
    });
  }
  capBox.addEventListener("change", () => { view.capacity = capBox.checked; redraws.forEach((f) => f()); });
  multBox.addEventListener("change", () => { view.multiples = multBox.checked; drawCharts(); });
  drawCharts();
  charts.appendChild(el("p", { class: "note" },
    "One chart per device and memory space. Drag across a chart to zoom (all charts follow), scroll to zoom around " +
    "the cursor, double-click to reset. Grey: requested (the trace's live bytes), blue: allocated, orange: reserved" +
    (data.runs.length > 1 ? " — or, with several runs overlaid, each run's colour, reserved dashed" : "") +
    "; dashed red/purple: the device's usable memory and the allocator's limit; vertical lines: the trace's marks; " +
    "dots: OOMs." + (windowed ? " Window: " + data.runs[0].history.window + " (the y axis fits the window's " +
    "points; the summary's figures are the whole run's)." : "")));

  // ---- address maps at each space's peak and at OOMs ----
  const maps = document.getElementById("maps");
  const probes = [];  // the maps drawn, in #probe mode
  const probeOut = FS.probeOut;  // what #probe found
  // Hovers points across the maps drawn since the last call, comparing what the tooltip says with
  // a linear search over the blocks (mouse coordinates are whole pixels, as the browser gives them).
  function probeMaps() {
    probes.splice(0).forEach((pr) => {
      const c = pr.canvas, rect = c.getBoundingClientRect();
      const res = { map: probeOut.length, probes: 0, agree: 0, in_use: 0, named: 0 };
      for (let row = 0; row < pr.rows; row++)
        for (let k = 0; k < 300; k++) {
          const x = Math.round(rect.left + (k + 0.5) * rect.width / 300), y = Math.round(rect.top + (row + 0.4) * rect.height / pr.rows);
          const p = Math.floor(((y - rect.top) / rect.height) * pr.rows) * pr.perRow + ((x - rect.left) / rect.width) * pr.perRow;
          const truth = pr.packed.find(([s0, b]) => s0 <= p && p < s0 + b[1]);
          tip.style.display = "none";
          c.dispatchEvent(new MouseEvent("mousemove", { clientX: x, clientY: y }));
          const shown = tip.style.display === "block" ? tip.textContent : "";
          res.probes++;
          if (truth ? shown.includes(" block at " + truth[1][5] + ",") : shown === "") res.agree++;
          if (truth && truth[1][2]) {
            res.in_use++;
            const buf = pr.byAddr.get(truth[1][5]);
            if (buf && shown.includes("buffer: " + (buf.name || "id " + buf.id))) res.named++;
          }
        }
      probeOut.push(res);
    });
  }
  // One space's address map into `target`: every region in address order, laid end to end and
  // wrapped into rows of equal bytes (a few big regions — BFC, a static heap — get a row each, a
  // thousand segments share a few dozen rows). sp: {device, space, regions: [[hex base, size, id]],
  // blocks: [[offset in region, size, in use, mapped, region id, hex address]]}; byAddr: hex
  // address → the buffer there ({id, name, shape, requested, block, event_index, stack}).
  function drawMap(target, sp, byAddr) {
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
      ". Coloured: buffers in use (hatched: padding or rounding beyond the request); white: free; grey: reserved " +
      "but unmapped; dark ticks: region starts."));
    const c = el("canvas", { class: "map", width: 900, height: rows * (RH + GAP), "data-space": keyOf(sp) });
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
    const packed = [];  // [packed start, block], sorted by packed start for the hover's binary search
    sp.blocks.forEach((b) => {
      const i = regionIndex.get(b[4]);
      if (i === undefined) return;
      packed.push([starts[i] + b[0], b]);
    });
    packed.sort((a, b) => a[0] - b[0]);
    const hatch = ctx.createPattern((() => {
      const h = document.createElement("canvas");
      h.width = h.height = 6;
      const g = h.getContext("2d");
      g.fillStyle = "#f4e3b0";
      g.fillRect(0, 0, 6, 6);
      g.strokeStyle = "#b8860b";
      g.beginPath(); g.moveTo(0, 6); g.lineTo(6, 0); g.stroke();
      return h;
    })(), "repeat");
    packed.forEach(([p, b]) => {
      const buf = byAddr.get(b[5]);
      paint(p, b[1], !b[3] ? "#e6e6e6" : b[2] ? (buf ? hashColor(buf.name || String(buf.id)) : "#5a7") : "#ffffff");
      if (b[2] && buf && buf.block > buf.requested && b[1] >= buf.requested)  // the padding beyond the request
        paint(p + buf.requested, b[1] - buf.requested, hatch);
    });
    if (sp.regions.length > 1) starts.forEach((p) => paint(p, Math.max(1, perRow / W2), "#333"));
    const pointAt = (evt) => {
      const rect = c.getBoundingClientRect();
      const row = Math.floor(((evt.clientY - rect.top) / rect.height) * rows);
      return row * perRow + ((evt.clientX - rect.left) / rect.width) * perRow;
    };
    const blockAt = (p) => {  // the last block starting at or before p, when it covers p
      let lo = 0, hi = packed.length;
      while (lo < hi) { const mid = (lo + hi) >> 1; if (packed[mid][0] <= p) lo = mid + 1; else hi = mid; }
      return lo > 0 && p < packed[lo - 1][0] + packed[lo - 1][1][1] ? packed[lo - 1][1] : null;
    };
    c.addEventListener("mousemove", (evt) => {
      const hit = blockAt(pointAt(evt));
      if (!hit) { hideTip(); return; }
      const g = sp.regions[regionIndex.get(hit[4])];
      const lines = [(hit[2] ? "in use" : hit[3] ? "free" : "unmapped") + " block at " + hit[5] + ", " + bytes(hit[1]),
        "region " + g[2] + " at " + g[0] + " (" + bytes(g[1]) + "), offset " + bytes(hit[0])];
      const buf = byAddr.get(hit[5]);
      if (hit[2] && buf) {
        lines.push("buffer: " + (buf.name || "id " + buf.id) + (buf.shape ? " " + buf.shape : ""));
        lines.push("requested " + bytes(buf.requested) + (buf.block > buf.requested ? ", padding/rounding " + bytes(buf.block - buf.requested) : ""));
        lines.push("allocated at event " + buf.event_index + (buf.freed !== undefined ? ", freed at event " + buf.freed : ""));
        (data.stacks[buf.stack] || []).forEach((fr) => lines.push("  " + fr));
      }
      showTip(evt, lines);
    });
    c.addEventListener("mouseleave", hideTip);
    if (FS.probing) probes.push({ canvas: c, packed: packed, rows: rows, perRow: perRow, byAddr: byAddr });
  }
  FS.drawMap = drawMap;
  FS.probeMaps = () => probeMaps();
  function drawMoment(r, m, target) {
    while (target.firstChild) target.removeChild(target.firstChild);
    const fig = at(r.report, m.path) || { spaces: [], top_buffers: [], live_buffers: 0 };
    const byAddr = new Map();
    m.buffers.forEach((b) => byAddr.set(b.addr, b));
    m.maps.forEach((sp, si) => {
      const f = fig.spaces[si] || {};
      target.appendChild(el("div", { class: "maptitle" },
        where(sp) + ": " + bytes(f.allocated_bytes) + " allocated of " + bytes(f.reserved_bytes) +
        " reserved; reserved but unallocated " + bytes(f.reserved_unallocated_bytes) + " (" + pct(f.reserved_unallocated_share) +
        "); external fragmentation " + pct(f.external_fragmentation) + " (largest free block in reserved memory " +
        bytes(f.largest_free_bytes) + ")" + (sp.truncated ? " (map truncated)" : "")));
      drawMap(target, sp, byAddr);
    });
    const top = fig.top_buffers || [];
    if (top.length) {
      const t = el("table", { class: "buffers" });
      const hr = el("tr");
      ["block", "requested", "padding", "buffer", "shape", "allocated at event", "frame"].forEach((h) => hr.appendChild(el("th", {}, h)));
      t.appendChild(hr);
      top.forEach((b) => {
        const row = el("tr");
        [bytes(b.block_bytes), bytes(b.requested_bytes), bytes(b.padding_bytes), b.name || "id " + b.id,
         b.shape ? (b.dtype || "") + "[" + b.shape.join(",") + "]" : "", String(b.event_index), b.frame || ""]
          .forEach((v) => row.appendChild(el("td", {}, v)));
        t.appendChild(row);
      });
      target.appendChild(el("div", { class: "maptitle" }, "largest live buffers (" + top.length + " of " + fig.live_buffers + " live)"));
      target.appendChild(t);
    }
  }
  data.runs.forEach((r) => {
    if (!r.moments.length) return;
    const box = el("div", { class: "mapbox" });
    box.appendChild(el("h3", {}, runName(r) + ": address map"));
    const pick = el("select", { class: "moment-select" });
    r.moments.forEach((m, i) => pick.appendChild(el("option", { value: i }, m.title)));
    box.appendChild(pick);
    const target = el("div", { class: "moment" });
    box.appendChild(target);
    maps.appendChild(box);
    pick.addEventListener("change", () => drawMoment(r, r.moments[pick.value], target));
    if (location.hash === "#probe")  // every moment's maps, probed one after the other
      r.moments.forEach((m) => { drawMoment(r, m, target); probeMaps(); });
    drawMoment(r, r.moments[0], target);
  });

  // ---- every OOM, and the allocator's own message in full ----
  const oomsDiv = document.getElementById("ooms");
  data.runs.forEach((r) => {
    const rep = r.report;
    if (!rep.ooms.length) return;
    oomsDiv.appendChild(el("h3", {}, runName(r) + ": " + rep.oom_count + " OOM" + (rep.oom_count === 1 ? "" : "s")));
    const t = el("table", { class: "oom-table" });
    const hr = el("tr");
    ["event", "device", "request", "shape", "requested", "rounded/padded", "allocated", "could still give", "largest piece", "cause", "frame"]
      .forEach((h) => hr.appendChild(el("th", {}, h)));
    t.appendChild(hr);
    rep.ooms.forEach((o) => {
      const q = o.request, row = el("tr", { class: "oom-row" });
      [String(o.event_index), where(o), q.name || "id " + o.id, q.shape ? (q.dtype || "") + "[" + q.shape.join(",") + "]" : "",
       bytes(o.requested_bytes), bytes(o.rounded_bytes), bytes(o.allocated_bytes), bytes(o.free_bytes), bytes(o.largest_free_bytes),
       o.cause + (o.kind ? " (" + o.kind + ")" : ""), q.frame || ""]
        .forEach((v) => row.appendChild(el("td", {}, v)));
      t.appendChild(row);
    });
    oomsDiv.appendChild(t);
    if (r.explanation) {
      oomsDiv.appendChild(el("div", { class: "maptitle" }, "the allocator's own report:"));
      oomsDiv.appendChild(el("pre", { class: "explanation" }, r.explanation));
    }
  });

  // ---- #probe: hover points across every chart ----
  if (location.hash === "#probe") {
    document.querySelectorAll("svg.chart").forEach((s, i) => {
      const rect = s.getBoundingClientRect();
      let answered = 0;
      for (let k = 1; k < 20; k++) {
        s.dispatchEvent(new MouseEvent("mousemove", { clientX: Math.round(rect.left + rect.width * (0.1 + 0.85 * k / 20)), clientY: Math.round(rect.top + rect.height / 2) }));
        if (tip.style.display === "block" && tip.textContent.includes("allocated")) answered++;
      }
      probeOut.push({ chart: i, probes: 19, answered: answered });
    });
    hideTip();
  }
})();
