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
    // Inside the window: left of the cursor when it would pass the right edge, above it when it
    // would pass the bottom (long lines wrap: the stylesheet's #tooltip).
    const x = Math.max(0, Math.min(evt.clientX + 14, window.innerWidth - tip.offsetWidth - 8));
    const below = evt.clientY + 14, above = evt.clientY - 14 - tip.offsetHeight;
    const y = below + tip.offsetHeight <= window.innerHeight - 8 || above < 0 ? below : above;
    tip.style.left = x + window.scrollX + "px";
    tip.style.top = y + window.scrollY + "px";
  }
  function hideTip() { tip.style.display = "none"; }
  function at(obj, path) {  // a JSON pointer into a run's report
    return path.split("/").slice(1).reduce((o, k) => (o === undefined ? o : o[k]), obj);
  }
  // A device's name where a run's report gives one (a set's "rank 3", a profile directory's "nodeB:0").
  const deviceNames = {};
  data.runs.forEach((r) => (r.report.devices || []).forEach((d) => { if (d.name) deviceNames[d.device] = d.name; }));
  const where = (d) => "device " + d.device + (deviceNames[d.device] ? " (" + deviceNames[d.device] + ")" : "") + " " +
    d.space;
  const keyOf = (d) => d.device + "/" + d.space;
  // A report that says where each device's process stopped (devices[].stopped_at_event); older
  // reports say only the run's first OOM.
  const perProcess = (rep) => (rep.devices || []).some((d) => d.stopped_at_event !== undefined);
  const runName = (r) => r.label;
  // Text with `code` spans, as advice quotes commands.
  function withCode(text) {
    const li = el("li");
    text.split("`").forEach((part, i) => li.appendChild(i % 2 ? el("code", {}, part) : document.createTextNode(part)));
    return li;
  }
  function hashColor(s, light) {
    let h = 0;
    for (let i = 0; i < s.length; i++) h = (h * 31 + s.charCodeAt(i)) | 0;
    return hueColor(h, light);
  }
  // The colour of a hash: its hue, at a lightness (hashColor's, for a hash made without a string).
  function hueColor(h, light) {
    return "hsl(" + (Math.abs(h) % 360) + ",55%," + (light || 55) + "%)";
  }
  // Ticks on round values: about `count` multiples of 1, 2 or 5 × 10^k between lo and hi.
  function niceStep(span, count) {
    const raw = span / Math.max(1, count), p = Math.pow(10, Math.floor(Math.log10(raw)));
    const m = raw / p;
    return (m < 1.5 ? 1 : m < 3 ? 2 : m < 7 ? 5 : 10) * p;
  }
  function ticks(lo, hi, count, whole) {
    if (!(hi > lo)) return [lo];
    let step = niceStep(hi - lo, count);
    if (whole) step = Math.max(1, Math.round(step));
    const out = [];
    for (let k = Math.ceil(lo / step - 1e-9); k * step <= hi + step * 1e-9; k++) out.push(k * step);
    return out;
  }
  // Byte ticks: round in the binary unit of the larger end (0, 2 GiB, 4 GiB, ... or 0, 256 MiB, ...).
  const UNITS = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  function byteUnit(v) {
    let u = 0;
    while (u + 1 < UNITS.length && Math.abs(v) >= Math.pow(1024, u + 1)) u++;
    return u;
  }
  function byteTicks(lo, hi, count) {
    const U = Math.pow(1024, byteUnit(Math.max(Math.abs(lo), Math.abs(hi))));
    return ticks(lo / U, hi / U, count, U === 1).map((v) => v * U);
  }
  // A tick's label: as few digits as the value needs in its unit ("2 GiB", "2.5 GiB", "512 MiB").
  function byteTick(v) {
    const u = byteUnit(v), x = v / Math.pow(1024, u);
    return (Math.abs(x - Math.round(x)) < 1e-9 ? String(Math.round(x)) : String(Number(x.toPrecision(4)))) + " " + UNITS[u];
  }
  function secondsText(s) {
    return s >= 1 ? s.toFixed(3) + " s" : s >= 1e-3 ? (s * 1e3).toFixed(3) + " ms" : (s * 1e6).toFixed(1) + " us";
  }
  function secondsTick(s) {  // a round time's label
    const [d, u] = s >= 1 || s === 0 ? [1, " s"] : s >= 1e-3 ? [1e-3, " ms"] : [1e-6, " us"];
    return String(Number((s / d).toPrecision(6))) + u;
  }
  // The width charts are drawn at: their box's, so that they use the window's width.
  function widthOf(node, fallback) {
    const w = node && node.clientWidth;
    return Math.max(320, Math.floor(w || fallback || 900));
  }
  // The x range every chart of the page shows, in events (the runs of a diff stay aligned).
  // lo..hi: the whole; x0..x1: the view. Charts register a redraw in FS.redraws.
  const view = { lo: 0, hi: 1, x0: 0, x1: 1, time: false };
  function setX(x0, x1) {
    const span = Math.max(1, x1 - x0);
    if (span >= view.hi - view.lo) { x0 = view.lo; x1 = view.hi; }
    else if (x0 < view.lo) { x0 = view.lo; x1 = view.lo + span; }
    else if (x1 > view.hi) { x1 = view.hi; x0 = view.hi - span; }
    view.x0 = x0;
    view.x1 = x1;
    FS.redraws.forEach((f) => f());
  }
  // The toolbar of a chart: pan and zoom on time (every chart follows) and on bytes (this chart).
  function zoomBar(parent, yz) {
    const bar = el("div", { class: "controls zoombar" });
    const b = (label, title, fn, cls) => {
      const x = el("button", { title: title, class: cls || "" }, label);
      x.addEventListener("click", fn);
      bar.appendChild(x);
      return x;
    };
    bar.appendChild(el("span", {}, "time: "));
    const span = () => view.x1 - view.x0;
    b("◀", "earlier", () => setX(view.x0 - span() / 4, view.x1 - span() / 4));
    b("▶", "later", () => setX(view.x0 + span() / 4, view.x1 + span() / 4));
    b("+", "zoom in on time", () => setX(view.x0 + span() / 4, view.x1 - span() / 4), "zoom-in");
    b("−", "zoom out on time", () => setX(view.x0 - span() / 2, view.x1 + span() / 2));
    if (yz) {
      bar.appendChild(el("span", {}, " bytes: "));
      b("▲", "higher", () => yz.pan(0.25));
      b("▼", "lower", () => yz.pan(-0.25));
      b("+", "zoom in on bytes", () => yz.zoom(0.5));
      b("−", "zoom out on bytes", () => yz.zoom(2));
    }
    b("reset", "the whole run, the y axis fitted", () => { if (yz) yz.reset(); setX(view.lo, view.hi); }, "reset");
    parent.appendChild(bar);
    return bar;
  }
  // A chart's own byte range: fitted to what the view shows until the user zooms or pans it.
  function yZoom(redraw) {
    const z = { auto: true, y0: 0, y1: 1 };
    z.fit = (top) => { if (z.auto) { z.y0 = 0; z.y1 = Math.max(1, top); } };
    z.zoom = (k, at) => {
      const c = at === undefined ? (z.y0 + z.y1) / 2 : at;
      z.y0 = Math.max(0, c - (c - z.y0) * k);
      z.y1 = Math.max(z.y0 + 1, c + (z.y1 - c) * k);
      z.auto = false;
      redraw();
    };
    z.pan = (f) => {
      const d = (z.y1 - z.y0) * f;
      if (z.y0 + d < 0) return;
      z.y0 += d;
      z.y1 += d;
      z.auto = false;
      redraw();
    };
    z.reset = () => { z.auto = true; redraw(); };
    return z;
  }
  // What the other views (sim/viewer_*.js, after this file) share with this one.
  const FS = window.FS = { data: data, bytes: bytes, pct: pct, el: el, svg: svg, showTip: showTip, hideTip: hideTip,
    at: at, where: where, keyOf: keyOf, runName: runName, withCode: withCode, hashColor: hashColor, hueColor: hueColor, tip: tip,
    ticks: ticks, byteTicks: byteTicks, byteTick: byteTick, secondsText: secondsText, secondsTick: secondsTick,
    widthOf: widthOf, view: view, setX: setX, zoomBar: zoomBar, yZoom: yZoom,
    probing: location.hash === "#probe", probeOut: [], redraws: [] };

  // A view's work (decoding the allocation log, drawing its chart) done when the view comes near
  // the screen: a recording of millions of events shows its first screen without paying for the
  // views below it. At once for a view on the first screen, when probing (#probe: the tests), and
  // for every view with #eager (every view drawn before the page says it is ready: scripts/bench).
  const soon = new Map();
  const eager = location.hash === "#probe" || location.hash === "#eager" || !("IntersectionObserver" in window);
  const watch = eager ? null : new IntersectionObserver((entries) => entries.forEach((x) => {
    const f = soon.get(x.target);
    if (!x.isIntersecting || !f) return;
    soon.delete(x.target);
    watch.unobserve(x.target);
    f();
  }), { rootMargin: "50% 0px" });
  FS.whenShown = (node, work) => {
    if (eager || node.getBoundingClientRect().top < window.innerHeight) { work(); return; }
    soon.set(node, work);
    watch.observe(node);
  };

  // Devices in one order in every section: by ordinal, then by space as fragsim lists them.
  const SPACES = ["hbm", "collective", "vmem", "smem", "cmem", "host"];
  const byDevice = (a, b) => a.device - b.device || SPACES.indexOf(a.space) - SPACES.indexOf(b.space);
  FS.byDevice = byDevice;

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
    if (rep.empty_cache) {  // as the text summary says it (its text; reports before it had one: the calls)
      const n = rep.empty_cache.calls;
      lines.appendChild(el("li", { class: "action" }, rep.empty_cache.text || ("empty_cache: the program called it " +
        n + " time" + (n === 1 ? "" : "s") + "; the last one: " + rep.empty_cache.effect)));
    }
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
    rep.devices.slice().sort(byDevice).forEach((d) => {
      const binds = rep.binding && rep.binding.device === d.device && rep.binding.space === d.space;
      const fr = d.fragmentation.at_peak_allocated;
      // A space with no OOM of its own in a run that stopped at another's: replayed only to the stop, so
      // its figures are up to it (peak requested excepted: the trace's, docs/metrics.md).
      // A set of recordings stops per process (devices[].stopped_at_event): another rank's OOM leaves it "ok".
      const result = !d.completed ? "OOM"
        : d.stopped_at_event !== undefined ? "stopped at event " + d.stopped_at_event
        : rep.stopped_early && rep.ooms.length && !perProcess(rep) ? "stopped at event " + rep.ooms[0].event_index : "ok";
      const row = el("tr", { class: "summary-row" });
      // A device with a name (a rank of a set of recordings) as the text report shows it: "3 (rank 3)".
      const dev = String(d.device) + (d.name ? " (" + d.name + ")" : "");
      [runName(r)].concat(several ? [dev + (binds ? " *" : ""), d.space] : []).concat([result, String(d.oom_count),
        d.unbounded ? "no limit" : bytes(d.usable_bytes), bytes(d.peak_requested_bytes), bytes(d.peak_allocated_bytes), bytes(d.peak_reserved_bytes),
        bytes(fr.reserved_unallocated_bytes) + " (" + pct(fr.reserved_unallocated_share) + ")", pct(fr.external),
        pct(d.fragmentation.max),
        d.waste && d.waste.plan_bytes !== undefined
          ? bytes(d.waste.plan_bytes) + (d.waste.plan_optimal ? " (optimal)" : "") + "; " + bytes(d.waste.fragmentation_bytes) +
            // Memory above the plan that no placement is to blame for (docs/metrics.md, "Waste split");
            // none above it: the allocator reserved less than the plan (trial 22 #4: a device stopped at
            // an OOM read "0 B (reserved before the recording began …)").
            (d.waste.fragmentation_bytes === 0 && d.waste.reserved_bytes < d.waste.plan_bytes
              ? " (reserved " + bytes(d.waste.reserved_bytes) + ", less" + (d.oom_count ? ": it stopped at an OOM" : "") + ")"
              : d.waste.reserved_up_front ? " (a pool reserved up front)"
              : d.waste.reserved_before_recording ? " (reserved before the recording began: demand or fragmentation)" : "")
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
  if (data.runs.some((r) => r.timelines.length)) charts.appendChild(el("h2", {}, "Memory over time"));
  // A run's events: up to its stop (the first OOM, without --keep-going, or the allocator's abort:
  // nothing after it was replayed), else the whole trace, or the --from/--to window when every run
  // was drawn for one (its timelines hold that window's events only).
  function runEnd(r) {
    const events = data.traces[r.trace] ? data.traces[r.trace].events : r.report.trace.events;
    const h = r.history;
    if (h && h.stopped_at >= 0) return h.stopped_at;
    // Each process stops alone (a set of recordings): the run ends where the last one stopped, or at
    // the trace's end while one replayed on.
    const devs = r.report.devices || [];
    if (perProcess(r.report))
      return devs.every((d) => d.stopped_at_event !== undefined) ? Math.max(...devs.map((d) => d.stopped_at_event))
                                                                 : Math.max(0, events - 1);
    if (r.report.stopped_early && r.report.ooms.length) return r.report.ooms[0].event_index;
    if (r.report.fatal) return r.report.fatal.event_index;
    return Math.max(0, events - 1);
  }
  FS.runEnd = runEnd;
  // Where slot k of a run's history stopped: its own process's stop (a set's rank that ran out
  // while the others replayed on), else the run's; undefined when it replayed to the end.
  FS.slotStop = (h, k) => {
    const own = h.slot_stopped_at && h.slot_stopped_at[k] >= 0 ? h.slot_stopped_at[k] : undefined;
    return own !== undefined ? own : h.stopped_at >= 0 ? h.stopped_at : undefined;
  };
  const windows = data.runs.map((r) => (r.history && r.history.window ? [r.history.first, r.history.last] : null));
  const windowed = windows.length > 0 && windows.every((w) => w);
  const minEvent = windowed ? Math.min(...windows.map((w) => w[0])) : 0;
  const maxEvent = windowed ? Math.max(minEvent + 1, ...windows.map((w) => w[1]))
                            : Math.max(1, ...data.runs.map(runEnd));
  view.lo = view.x0 = minEvent;
  view.hi = view.x1 = maxEvent;
  const capView = { capacity: false, multiples: false };
  const H = 210, L = 70, R = 10, T = 14, B = 24;
  const redraws = FS.redraws;
  function lower(points, x) {  // first point with event_index >= x
    let lo = 0, hi = points.length;
    while (lo < hi) { const m = (lo + hi) >> 1; if (points[m][0] < x) lo = m + 1; else hi = m; }
    return lo;
  }
  // (run, space) series of a chart: the run's timeline and report entry for that space.
  function seriesOf(r, key) {
    const tl = r.timelines.find((t) => keyOf(t) === key);
    const dev = r.report.devices.find((d) => keyOf(d) === key);
    // A set's rank that ran out stopped there while the others replayed on (its own stop).
    const end = dev && dev.stopped_at_event !== undefined ? Math.min(dev.stopped_at_event, runEnd(r)) : runEnd(r);
    return tl && dev ? { run: r, points: tl.points, dev: dev, end: end } : null;
  }
  const keyList = [];
  data.runs.forEach((r) => r.timelines.forEach((t) => { if (!keyList.some((k) => keyOf(k) === keyOf(t))) keyList.push(t); }));
  const keys = keyList.sort(byDevice).map(keyOf);
  // What a run's recorded program did besides allocating (the report's actions: empty_cache
  // calls, the recording's own OOMs) and its marks, as the charts draw them.
  FS.actionsOf = (r) => r.report.actions || [];
  // The usable-memory line: "usable" (inferred from the recording when it was), "capacity" only
  // where the device gives allocators all of it.
  const usableLabel = (d) => (d.usable_inferred ? "usable (inferred from the recording)"
    : d.usable_bytes === d.capacity_bytes ? "capacity" : "usable");
  FS.usableLabel = usableLabel;
  function chart(title, series, overlaid, parent) {
    const box = el("div", { class: "chartbox" });
    box.appendChild(el("h3", {}, title));
    const yz = yZoom(() => draw());
    zoomBar(box, yz);
    const s = svg("svg", { class: "chart", width: "100%" });
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
    let W = 900, yMax = 1, y0 = 0;
    const xs = (x) => L + ((x - view.x0) / Math.max(1, view.x1 - view.x0)) * (W - L - R);
    const ys = (y) => H - B - (Math.max(0, Math.min(y, yMax) - y0) / Math.max(1, yMax - y0)) * (H - T - B);
    // The highest point each series shows in the view (the y axis fits it).
    function viewTop() {
      let top = 1;
      series.forEach((x) => {
        const pts = x.points, a = Math.max(0, lower(pts, view.x0) - 1), b = Math.min(pts.length, lower(pts, view.x1) + 1);
        for (let i = a; i < b; i++) if (pts[i][0] <= x.end) top = Math.max(top, pts[i][1], pts[i][2], pts[i][3]);
      });
      return top;
    }
    function draw() {
      W = widthOf(box);
      s.setAttribute("viewBox", "0 0 " + W + " " + H);
      s.setAttribute("data-x0", String(Math.round(view.x0)));
      s.setAttribute("data-x1", String(Math.round(view.x1)));
      // The y axis fits the view; capacity and limit join it when asked, or when they are near.
      const dataMax = viewTop();
      const lines = [["capacity", usable, usableLabel(dev0)], ["limit", limit, "limit"]].filter((v) => v[1]);
      if (yz.auto) {
        y0 = 0;
        yMax = dataMax * 1.08;
        lines.forEach(([, v]) => { if (capView.capacity || v <= dataMax * 1.5) yMax = Math.max(yMax, v * 1.02); });
      } else {
        y0 = yz.y0;
        yMax = yz.y1;
      }
      yz.y0 = y0;
      yz.y1 = yMax;
      const above = lines.filter(([, v]) => v > yMax);
      capNote.textContent = above.map(([, v, name]) => name + " " + bytes(v) + " is above this chart").join("; ") +
        (above.length ? " (tick “y axis up to capacity” to include it)" : "");
      while (plot.firstChild) plot.removeChild(plot.firstChild);
      byteTicks(y0, yMax, 4).forEach((v) => {  // y grid on round values
        if (v < y0 || v > yMax) return;
        plot.appendChild(svg("line", { x1: L, x2: W - R, y1: ys(v), y2: ys(v), stroke: "#eee" }));
        const t = svg("text", { x: L - 4, y: ys(v) + 4, "text-anchor": "end", class: "axis" });
        t.textContent = byteTick(v);
        plot.appendChild(t);
      });
      ticks(view.x0, view.x1, Math.max(3, Math.floor(W / 150)), true).forEach((v) => {  // x axis: event index
        const t = svg("text", { x: xs(v), y: H - 6, "text-anchor": "middle", class: "axis" });
        t.textContent = (Math.round(v) || 0).toLocaleString();
        plot.appendChild(t);
      });
      let labelY = null;  // the last label's baseline: a label too close below it goes under its line
      let offscale = 0;   // off-scale arrows already drawn (each further one is drawn to their left)
      // Arrows first: a line near the top then puts its label below them, not over them.
      lines.filter(([, v]) => v > yMax).forEach(([k, v, name]) => {  // off scale: an arrow at the top
        const t = svg("text", { x: W - R - 4 - offscale, y: T - 2, "text-anchor": "end", class: "axis offscale-" + k, fill: COLORS[k] });
        t.textContent = "▲ " + name + " " + bytes(v);
        plot.appendChild(t);
        offscale += 6.5 * t.textContent.length + 12;
        labelY = T - 2;
      });
      lines.filter(([, v]) => v <= yMax).forEach(([k, v, name]) => {
        if (v < y0) return;
        plot.appendChild(svg("line", { x1: L, x2: W - R, y1: ys(v), y2: ys(v), stroke: COLORS[k], "stroke-dasharray": "6,3", class: "line-" + k }));
        let y = ys(v) - 3;
        if (labelY !== null && Math.abs(y - labelY) < 12) y = Math.max(y, labelY) + 12;
        labelY = y;
        const t = svg("text", { x: W - R - 4, y: y, "text-anchor": "end", class: "axis label-" + k, fill: COLORS[k] });
        t.textContent = name + " " + bytes(v);
        plot.appendChild(t);
      });
      const vline = (e, cls, color, dash, name) => {
        const line = svg("line", { x1: xs(e), x2: xs(e), y1: T, y2: H - B, stroke: color, class: cls });
        if (dash) line.setAttribute("stroke-dasharray", dash);
        const title = svg("title");
        title.textContent = name;
        line.appendChild(title);
        plot.appendChild(line);
      };
      const drawn = new Set();
      series.forEach((x) => {
        (x.run.report.marks || []).forEach((m) => {
          if (m.event_index < view.x0 || m.event_index > view.x1 || drawn.has("m" + m.event_index)) return;
          drawn.add("m" + m.event_index);
          vline(m.event_index, "mark", "#bbb", null, m.name);
        });
        FS.actionsOf(x.run).forEach((a) => {
          if (a.event_index < view.x0 || a.event_index > view.x1 || drawn.has("a" + a.event_index)) return;
          drawn.add("a" + a.event_index);
          vline(a.event_index, "action", "#8c564b", "3,2", a.name + " at event " + a.event_index);
        });
      });
      const drawnRequested = new Set();
      series.forEach((x, si) => {
        const pts = x.points, a = Math.max(0, lower(pts, view.x0) - 1), b = Math.min(pts.length, lower(pts, view.x1) + 1);
        const color = RUN_COLORS[si % RUN_COLORS.length];
        const end = Math.min(x.end, view.x1);
        ["requested", "allocated", "reserved"].forEach((k, idx) => {
          if (k === "requested" && overlaid && drawnRequested.has(x.run.trace)) return;  // the trace's, not the policy's
          drawnRequested.add(x.run.trace);
          // Steps: the value after a point holds until the next point (and to the run's end).
          let d = "";
          for (let i = a; i < b && pts[i][0] <= x.end; i++) {
            const px = xs(Math.max(view.x0, pts[i][0])).toFixed(1), py = ys(pts[i][idx + 1]).toFixed(1);
            d += d ? "H" + px + "V" + py : "M" + px + "," + py;
          }
          if (d && end >= view.x0) d += "H" + xs(end).toFixed(1);
          const attrs = { d: d, fill: "none", stroke: overlaid && k !== "requested" ? color : COLORS[k], "stroke-width": 1.5, class: "series-" + k };
          if (overlaid && k === "reserved") attrs["stroke-dasharray"] = "5,3";
          plot.appendChild(svg("path", attrs));
        });
        if (x.end < maxEvent && x.end >= view.x0 && x.end <= view.x1)
          vline(x.end, "stop", "#d62728", "4,3", runName(x.run) + (x.end < runEnd(x.run)
            ? ": this device's process stopped here (its first OOM); nothing of it after this was replayed, while the " +
              "set's other ranks replayed on"
            : ": the run stopped here (" + (x.run.report.fatal ? "the allocator aborted" : "its first OOM") +
              "); nothing after it was replayed"));
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
    const toY = (evt) => {
      const rect = s.getBoundingClientRect();
      const py = ((evt.clientY - rect.top) / rect.height) * H;
      return y0 + ((H - B - py) / (H - T - B)) * (yMax - y0);
    };
    let dragFrom = null, panFrom = null;
    s.addEventListener("mousedown", (evt) => {
      if (evt.shiftKey) panFrom = [toX(evt), toY(evt), view.x0, view.x1, y0, yMax];
      else dragFrom = toX(evt);
    });
    s.addEventListener("mousemove", (evt) => {
      const x = toX(evt);
      if (panFrom) {  // shift+drag: pan on time and bytes
        const dx = panFrom[0] - x;
        setX(panFrom[2] + dx, panFrom[3] + dx);
        return;
      }
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
        if (x > s2.end) { lines.push((overlaid ? runName(s2.run) + ": " : "") + "stopped at event " + s2.end); return; }
        const i = Math.min(s2.points.length - 1, lower(s2.points, x + 1) - 1);
        const p = i >= 0 ? s2.points[i] : [0, 0, 0, 0, 0];  // before the space's first event: nothing held

        lines.push((overlaid ? runName(s2.run) + ": " : "") + "requested " + bytes(p[1]) + ", allocated " + bytes(p[2]) +
          ", reserved " + bytes(p[3]) + ", external fragmentation " + pct(p[4]));
      });
      showTip(evt, lines);
    });
    s.addEventListener("mouseleave", () => { hideTip(); cursor.setAttribute("visibility", "hidden"); panFrom = null; });
    s.addEventListener("mouseup", (evt) => {
      const x = toX(evt);
      sel.setAttribute("visibility", "hidden");
      if (dragFrom !== null && Math.abs(x - dragFrom) > (view.x1 - view.x0) / 200)
        setX(Math.max(minEvent, Math.min(dragFrom, x)), Math.min(maxEvent, Math.max(dragFrom, x)));
      dragFrom = null;
      panFrom = null;
    });
    s.addEventListener("dblclick", () => { yz.auto = true; setX(minEvent, maxEvent); });
    s.addEventListener("wheel", (evt) => {
      evt.preventDefault();
      const k = (evt.deltaY || evt.deltaX) > 0 ? 1.25 : 0.8;
      if (evt.shiftKey || evt.altKey) { yz.zoom(k, toY(evt)); return; }  // bytes
      const x = toX(evt);
      setX(x - (x - view.x0) * k, x + (view.x1 - x) * k);
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
  let chartRedraws = [];
  function drawCharts() {
    chartRedraws.forEach((f) => { const i = redraws.indexOf(f); if (i >= 0) redraws.splice(i, 1); });
    const before = redraws.length;
    while (chartArea.firstChild) chartArea.removeChild(chartArea.firstChild);
    keys.forEach((key) => {
      const all = data.runs.map((r) => seriesOf(r, key)).filter((x) => x);
      const [device, space] = key.split("/");
      const name = where({ device: device, space: space }).replace(/^device /, "");
      if (capView.multiples || all.length === 1)
        all.forEach((x) => chart((data.runs.length > 1 ? runName(x.run) + " — " : "") + "device " + name +
          (x.dev.oom_count ? " — " + x.dev.oom_count + " OOM" + (x.dev.oom_count === 1 ? "" : "s") : ""), [x], false, chartArea));
      else
        chart("device " + name + ": " + all.length + " runs", all, true, chartArea);
    });
    chartRedraws = redraws.slice(before);
  }
  capBox.addEventListener("change", () => { capView.capacity = capBox.checked; redraws.forEach((f) => f()); });
  multBox.addEventListener("change", () => { capView.multiples = multBox.checked; drawCharts(); });
  drawCharts();
  const stopped = data.runs.filter((r) => runEnd(r) < maxEvent);
  charts.appendChild(el("p", { class: "note" },
    "One chart per device and memory space, in steps: each value holds until the next event that changes it. " +
    "Drag across a chart to zoom on time (all charts follow), scroll to zoom around the cursor (shift+scroll: on " +
    "bytes), shift+drag to pan; the buttons above each chart pan and zoom too, “reset” or a double-click shows the " +
    "whole run. Grey: requested (the trace's live bytes), blue: allocated, orange: reserved" +
    (data.runs.length > 1 ? " — or, with several runs overlaid, each run's colour, reserved dashed" : "") +
    "; dashed red/purple: the device's usable memory and the allocator's limit; grey vertical lines: the trace's " +
    "marks; brown dashed lines: what the recorded program did besides allocating (empty_cache, its own OOMs); " +
    "dots: OOMs." + (stopped.length ? " A red dashed line: where a run stopped at its first OOM; its lines end " +
    "there, since nothing after it was replayed." : "") +
    // Each space whose state before the recording did not fit (a set's ranks stop alone; one space: the run).
    data.runs.map((r) => (r.report.stopped_early ? r.report.ooms : []).filter((o) => o.before_recording).map((o) =>
      " " + (r.report.devices.length > 1 ? (data.runs.length > 1 ? runName(r) + ": " : "") + where(o)
        : data.runs.length > 1 ? runName(r) : "The run") + " stopped before the trace's first event: the " +
      bytes(o.before_recording.live_bytes) + " live when recording began do not fit, so its " +
      (r.report.devices.length > 1 ? "chart holds" : "charts hold") + " that one moment.").join("")).join("") + (windowed ? " Window: " + data.runs[0].history.window +
    " (the y axis fits the window's points; the summary's figures are the whole run's)." : "")));
  window.addEventListener("resize", () => redraws.forEach((f) => f()));

  // ---- address maps at each space's peak and at OOMs ----
  const maps = document.getElementById("maps");
  if (data.runs.some((r) => r.moments.length)) maps.appendChild(el("h2", {}, "Address maps"));
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
          const p = pr.at(x, y);
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
  // Zoom and pan over the bytes laid out (scroll, drag, the buttons); a map whose memory in use
  // and mapped lies in a small part of what it reserves opens on that part: a reservation mapped
  // only at its start (an expandable segment's, one per stream and pool, each about the device's
  // size) is laid out up to a short stub past its last mapped block, its unmapped tail folded
  // away; then, as for one big arena used in a corner, the view opens where memory is used.
  // "all" lays every region out whole; `whole` draws it so from the start.
  function drawMap(target, sp, byAddr, highlight, whole) {
    if (!sp.regions.reduce((a, g) => a + g[1], 0)) return undefined;
    const box = el("div", { class: "mapview" });
    target.appendChild(box);
    return drawMapInto(box, sp, byAddr, highlight, !!whole);
  }
  function drawMapInto(box, sp, byAddr, highlight, whole) {
    const redraw = (w) => {  // laid out again (folded or whole) in the same place
      const fresh = el("div", { class: "mapview" });
      box.parentNode.replaceChild(fresh, box);
      drawMapInto(fresh, sp, byAddr, highlight, w);
    };
    const full = sp.regions.reduce((a, g) => a + g[1], 0);
    const rows = sp.regions.length <= 8 ? sp.regions.length : Math.min(40, Math.ceil(Math.sqrt(sp.regions.length) * 1.5));
    const RH = 22, GAP = 4;
    const regionIndex = new Map();
    sp.regions.forEach((g, i) => regionIndex.set(g[2], i));
    // Each region's laid-out length: whole, or (folded) up to its last mapped block and a stub of
    // its unmapped rest, where that rest is over 3/4 of it.
    const mappedEnd = sp.regions.map(() => 0);
    sp.blocks.forEach((b) => {
      const i = regionIndex.get(b[4]);
      if (i !== undefined && b[3]) mappedEnd[i] = Math.max(mappedEnd[i], b[0] + b[1]);
    });
    let shown = sp.regions.map((g, i) => (mappedEnd[i] < g[1] / 4 ? Math.min(g[1], mappedEnd[i] + Math.max(mappedEnd[i] / 16, 2 << 20)) : g[1]));
    const foldable = shown.reduce((a, x) => a + x, 0) < full * 0.75;
    if (whole || !foldable) shown = sp.regions.map((g) => g[1]);
    const folded = !whole && foldable;
    const total = shown.reduce((a, x) => a + x, 0);
    const starts = [];  // packed offset of each region
    let acc = 0;
    shown.forEach((len) => { starts.push(acc); acc += len; });
    const packed = [];  // [packed start, block], sorted by packed start for the hover's binary search
    sp.blocks.forEach((b) => {
      const i = regionIndex.get(b[4]);
      if (i === undefined || b[0] >= shown[i]) return;
      // Only an unmapped tail is cut short by a fold (the mapped blocks all end before the stub).
      packed.push([starts[i] + b[0], b[0] + b[1] > shown[i] ? [b[0], shown[i] - b[0], b[2], b[3], b[4], b[5]] : b]);
    });
    packed.sort((a, b) => a[0] - b[0]);
    // Where memory is used: from the first block mapped to the end of the last one in use.
    let used0 = Infinity, used1 = 0;
    packed.forEach(([p, b]) => {
      if (b[3] && p < used0) used0 = p;
      if (b[2]) used1 = Math.max(used1, p + b[1]);
    });
    const zoomed = used1 > used0 && used1 - used0 < total / 4;
    const pad = zoomed ? (used1 - used0) * 0.02 : 0;
    const home = zoomed ? [Math.max(0, used0 - pad), Math.min(total, used1 + pad)] : [0, total];
    const mv = { p0: home[0], p1: home[1] };
    const label = el("div", { class: "regionlabel" });
    box.appendChild(label);
    const bar = el("div", { class: "controls zoombar" });
    const c = el("canvas", { class: "map", height: rows * (RH + GAP), "data-space": keyOf(sp) });
    c.style.height = rows * (RH + GAP) + "px";
    c.style.width = "100%";
    const button = (t, title, fn) => {
      const x = el("button", { title: title }, t);
      x.addEventListener("click", fn);
      bar.appendChild(x);
    };
    const setView = (p0, p1) => {
      const span = Math.min(total, Math.max(256, p1 - p0));
      p0 = Math.max(0, Math.min(total - span, p0));
      mv.p0 = p0;
      mv.p1 = p0 + span;
      paintAll();
    };
    bar.appendChild(el("span", {}, "bytes: "));
    button("◀", "lower addresses", () => setView(mv.p0 - (mv.p1 - mv.p0) / 4, mv.p1 - (mv.p1 - mv.p0) / 4));
    button("▶", "higher addresses", () => setView(mv.p0 + (mv.p1 - mv.p0) / 4, mv.p1 + (mv.p1 - mv.p0) / 4));
    button("+", "zoom in", () => setView(mv.p0 + (mv.p1 - mv.p0) / 4, mv.p1 - (mv.p1 - mv.p0) / 4));
    button("−", "zoom out", () => setView(mv.p0 - (mv.p1 - mv.p0) / 2, mv.p1 + (mv.p1 - mv.p0) / 2));
    button("where used", "the part of the map where memory is used",
           () => (whole && foldable ? redraw(false) : setView(home[0], home[1])));
    button("all", "every region whole", () => (folded ? redraw(true) : setView(0, total)));
    box.appendChild(bar);
    box.appendChild(c);
    const ctx = c.getContext("2d");
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
    let perRow = total / rows;
    function paintAll() {
      const W2 = c.width = widthOf(box);
      perRow = (mv.p1 - mv.p0) / rows;
      const atHome = mv.p0 === home[0] && mv.p1 === home[1] && (zoomed || folded);
      label.textContent = sp.regions.length + " region" + (sp.regions.length === 1 ? "" : "s") + " from " +
        sp.regions[0][0] + ", " + bytes(full) + (mv.p1 - mv.p0 < full ? "; showing " + bytes(Math.round(mv.p1 - mv.p0)) +
        " of it" + (atHome ? ", where memory is used (" + (folded ? "each reservation's unmapped tail folded away; " : "") +
        "“all” shows every region whole)" : "") : "") +
        (rows > 1 ? "; each row " + bytes(Math.round(perRow)) : "") + ". Coloured: buffers in use (hatched: padding or " +
        "rounding beyond the request); white: free; grey: reserved but unmapped; dark ticks: region starts.";
      c.setAttribute("data-p0", String(Math.round(mv.p0)));
      c.setAttribute("data-p1", String(Math.round(mv.p1)));
      function paint(q0, len, color) {  // packed byte range, clipped to the view, wrapped over rows
        let p = Math.max(q0, mv.p0) - mv.p0;
        const e = Math.min(q0 + len, mv.p1) - mv.p0;
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
      let i = Math.max(0, blockIndex(mv.p0));
      for (; i < packed.length && packed[i][0] < mv.p1; i++) {
        const [p, b] = packed[i];
        const buf = byAddr.get(b[5]);
        const dim = highlight && highlight.active && !(b[2] && buf && highlight.has(buf));
        paint(p, b[1], !b[3] ? "#e6e6e6" : b[2] ? (dim ? "#ddd" : buf ? hashColor(buf.name || String(buf.id)) : "#5a7") : "#ffffff");
        if (b[2] && buf && buf.block > buf.requested && b[1] >= buf.requested && !dim)  // the padding beyond the request
          paint(p + buf.requested, b[1] - buf.requested, hatch);
      }
      if (sp.regions.length > 1) starts.forEach((p) => paint(p, Math.max(1, perRow / W2), "#333"));
    }
    function blockIndex(p) {  // the last block starting at or before p, -1 when none
      let lo = 0, hi = packed.length;
      while (lo < hi) { const mid = (lo + hi) >> 1; if (packed[mid][0] <= p) lo = mid + 1; else hi = mid; }
      return lo - 1;
    }
    const pointAt = (x, y) => {
      const rect = c.getBoundingClientRect();
      const row = Math.floor(((y - rect.top) / rect.height) * rows);
      return mv.p0 + row * perRow + ((x - rect.left) / rect.width) * perRow;
    };
    const blockAt = (p) => {  // the block covering p, null when none
      const k = blockIndex(p);
      return k >= 0 && p < packed[k][0] + packed[k][1][1] ? packed[k][1] : null;
    };
    let dragFrom = null;
    c.addEventListener("mousedown", (evt) => { dragFrom = [evt.clientX, mv.p0, mv.p1]; });
    c.addEventListener("mouseup", () => { dragFrom = null; });
    c.addEventListener("mousemove", (evt) => {
      if (dragFrom && evt.buttons) {  // drag: pan
        const rect = c.getBoundingClientRect();
        const d = ((dragFrom[0] - evt.clientX) / rect.width) * (dragFrom[2] - dragFrom[1]) / rows;
        setView(dragFrom[1] + d, dragFrom[2] + d);
        return;
      }
      const hit = blockAt(pointAt(evt.clientX, evt.clientY));
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
    c.addEventListener("click", (evt) => {
      const hit = blockAt(pointAt(evt.clientX, evt.clientY));
      const buf = hit && hit[2] ? byAddr.get(hit[5]) : null;
      if (buf && FS.pinBuffer) FS.pinBuffer(buf);
    });
    c.addEventListener("mouseleave", () => { hideTip(); dragFrom = null; });
    c.addEventListener("wheel", (evt) => {
      evt.preventDefault();
      const p = pointAt(evt.clientX, evt.clientY), k = (evt.deltaY || evt.deltaX) > 0 ? 1.25 : 0.8;
      setView(p - (p - mv.p0) * k, p + (mv.p1 - p) * k);
    }, { passive: false });
    paintAll();
    if (FS.probing) probes.push({ canvas: c, packed: packed, rows: rows, byAddr: byAddr, at: pointAt });
    return { zoomed: zoomed, view: mv };
  }
  FS.drawMap = drawMap;
  FS.probeMaps = () => probeMaps();
  // Search matches, for the maps (the search itself is viewer_log.js's).
  const highlight = { get active() { return !!(FS.search && FS.search.active); }, has: (b) => FS.search.has(b) };
  FS.highlight = highlight;
  FS.onSearch = [];
  function drawMoment(r, m, target) {
    while (target.firstChild) target.removeChild(target.firstChild);
    const fig = at(r.report, m.path) || { spaces: [], top_buffers: [], live_buffers: 0 };
    const byAddr = new Map();
    m.buffers.forEach((b) => byAddr.set(b.addr, b));
    m.maps.map((sp, si) => [sp, fig.spaces[si] || {}]).sort((a, b) => byDevice(a[0], b[0])).forEach(([sp, f]) => {
      target.appendChild(el("div", { class: "maptitle" },
        where(sp) + ": " + bytes(f.allocated_bytes) + " allocated of " + bytes(f.reserved_bytes) +
        " reserved; reserved but unallocated " + bytes(f.reserved_unallocated_bytes) + " (" + pct(f.reserved_unallocated_share) +
        "); external fragmentation " + pct(f.external_fragmentation) + " (largest free block in reserved memory " +
        bytes(f.largest_free_bytes) + ")" + (sp.truncated ? " (map truncated)" : "")));
      drawMap(target, sp, byAddr, highlight);
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
    FS.onSearch.push(() => drawMoment(r, r.moments[pick.value], target));
    if (location.hash === "#probe")  // every moment's maps, probed one after the other
      r.moments.forEach((m) => { drawMoment(r, m, target); probeMaps(); });
    drawMoment(r, r.moments[0], target);
  });

  // ---- every OOM, and the allocator's own message in full ----
  const oomsDiv = document.getElementById("ooms");
  if (data.runs.some((r) => r.report.ooms.length)) oomsDiv.appendChild(el("h2", {}, "OOMs"));
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
