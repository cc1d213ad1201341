// Live buffers over time (issue 24): per run and per device and space, a stacked area of the live
// buffers, the largest drawn one by one (a band from its alloc to its free, stacked in alloc
// order, falling as those below it are freed) and every other buffer summed in grey at the bottom.
// fragsim wrote the points (history.timelines: event, time, live bytes, "other" bytes) and each
// band's buffer (history.buffers); this file only stacks and draws them. Hover a band: its name,
// sizes, shape, lifetime and full stack; click pins it (click again, or elsewhere, to unpin). The
// trace's marks and the OOMs are on the same axis; x is the event index or the time.
"use strict";
(function () {
  const FS = window.FS, data = FS.data, el = FS.el, bytes = FS.bytes;
  const runs = data.runs.filter((r) => r.history && r.history.timelines.some((t) => t.points.length));
  const box = document.getElementById("buffers");
  if (!runs.length) return;
  box.appendChild(el("h2", {}, "Live buffers over time"));
  const controls = el("div", { class: "controls" });
  controls.appendChild(el("span", {}, "x axis: "));
  const xEvent = el("input", { type: "radio", name: "bufx", id: "bufx-event", checked: "" });
  const xTime = el("input", { type: "radio", name: "bufx", id: "bufx-time" });
  controls.appendChild(xEvent);
  controls.appendChild(el("label", { for: "bufx-event" }, " event index "));
  controls.appendChild(xTime);
  // A trace that records no times (its t are event numbers) offers no time axis.
  const untimed = data.runs.every((r) => r.history && r.history.timed === false);
  if (untimed) xTime.disabled = true;
  controls.appendChild(el("label", { for: "bufx-time" }, " time from the first event" +
    (untimed ? " (the trace records no times)" : "")));
  box.appendChild(controls);
  const W = 900, H = 260, L = 70, R = 10, T = 10, B = 24;
  const view = { time: false, x0: null, x1: null };  // shared by every chart (the runs of a diff stay aligned)
  const redraws = [];

  // A buffer of history.buffers as a readable object.
  function buffer(h, i) {
    const b = h.buffers[i];
    return { index: i, id: b[0], slot: b[1], alloc: b[2], allocT: b[3], free: b[4], freeT: b[5], requested: b[6],
      block: b[7], name: b[8] >= 0 ? h.strings[b[8]] : "", stack: b[9], shape: b[10] >= 0 ? h.strings[b[10]] : "",
      addr: b[11], padding: b[12], livedEvents: b[13], livedTicks: b[14] };
  }
  function secondsText(s) {
    return s >= 1 ? s.toFixed(3) + " s" : s >= 1e-3 ? (s * 1e3).toFixed(3) + " ms" : (s * 1e6).toFixed(1) + " us";
  }
  // " (1.250 ms in)": a time from the first event, "" where the trace records no times.
  function inText(h, ticks) {
    return h.timed === false ? "" : " (" + secondsText(ticks * h.seconds_per_tick) + " in)";
  }
  FS.inText = inText;
  function bufferLines(h, b) {
    const lines = ["buffer: " + (b.name || "id " + b.id) + (b.shape ? "  " + b.shape : ""),
      "block " + bytes(b.block) + ", requested " + bytes(b.requested) +
        (b.padding > 0 ? " (padding/rounding " + bytes(b.padding) + ")" : ""),
      "allocated at event " + b.alloc + inText(h, b.allocT) + (b.addr !== null ? " at 0x" + b.addr.toString(16) : ""),
      b.free >= 0 ? "freed at event " + b.free + inText(h, b.freeT) + ", lived " + b.livedEvents + " events" +
        (h.timed === false ? "" : ", " + secondsText(b.livedTicks * h.seconds_per_tick)) : "still live at the end"];
    const frames = data.stacks[b.stack] || [];
    if (frames.length) lines.push("stack (innermost first):");
    frames.forEach((f) => lines.push("  " + f));
    return lines;
  }
  FS.bufferLines = bufferLines;
  FS.historyBuffer = buffer;

  function chart(r, tl) {
    const h = r.history, pts = tl.points, slot = h.slots[tl.slot];
    const bands = tl.bands.map((i) => buffer(h, i));
    const dev = { device: slot[0], space: slot[1] };
    const wrap = el("div", { class: "bufbox" });
    const top = Math.max(0, ...pts.map((p) => p[2]));  // the most live bytes at once (0: nothing was placed)
    wrap.appendChild(el("h3", {}, (data.runs.length > 1 ? FS.runName(r) + " — " : "") + FS.where(dev) + ": " +
      (top === 0 ? "no buffer placed" : bands.length + " largest buffers drawn one by one, the rest in grey")));
    const c = el("canvas", { class: "bufchart", width: W, height: H, "data-space": FS.keyOf(dev) });
    c.style.width = W + "px";
    c.style.border = "1px solid #ddd";
    wrap.appendChild(c);
    const pinned = el("pre", { class: "pinned" });
    wrap.appendChild(pinned);
    box.appendChild(wrap);
    // Per point, each live band's bottom: bands stacked in alloc order above "other".
    const live = pts.map(() => []);  // per point: [band index, bottom, top]
    let k = 0;
    const open = [];
    const starts = bands.map((b, i) => [b.alloc, i]).sort((a, b) => a[0] - b[0]);
    pts.forEach((p, i) => {
      for (; k < starts.length && starts[k][0] <= p[0]; k++) open.push(starts[k][1]);
      let y = p[3];
      for (let j = 0; j < open.length; j++) {
        const b = bands[open[j]];
        if (b.free >= 0 && b.free <= p[0]) { open.splice(j--, 1); continue; }
        live[i].push([open[j], y, y + b.block]);
        y += b.block;
      }
    });
    const yMax = Math.max(1, top) * 1.05;
    const xOf = (p) => (view.time ? p[1] * h.seconds_per_tick : p[0]);
    let x0 = 0, x1 = 1;
    const xs = (x) => L + ((x - x0) / Math.max(1e-12, x1 - x0)) * (W - L - R);
    const ys = (y) => H - B - (y / yMax) * (H - T - B);
    let pin = -1;
    const ctx = c.getContext("2d");
    function draw() {
      const first = view.time ? pts[0][1] * h.seconds_per_tick : h.first;
      const last = view.time ? pts[pts.length - 1][1] * h.seconds_per_tick : h.last;
      x0 = view.x0 === null ? first : view.x0;
      x1 = view.x1 === null ? Math.max(first + 1e-12, last) : view.x1;
      ctx.clearRect(0, 0, W, H);
      ctx.fillStyle = "#fff";
      ctx.fillRect(0, 0, W, H);
      ctx.font = "10px sans-serif";
      ctx.fillStyle = "#555";
      ctx.strokeStyle = "#eee";
      for (let i = 0; i <= (top === 0 ? 0 : 4); i++) {  // an empty chart has one gridline, 0 B
        const v = (yMax * i) / 4;
        ctx.beginPath(); ctx.moveTo(L, ys(v)); ctx.lineTo(W - R, ys(v)); ctx.stroke();
        ctx.textAlign = "right";
        ctx.fillText(bytes(Math.round(v)), L - 4, ys(v) + 4);
      }
      for (let i = 0; i <= 5; i++) {
        const v = x0 + ((x1 - x0) * i) / 5;
        ctx.textAlign = i === 0 ? "left" : i === 5 ? "right" : "center";
        ctx.fillText(view.time ? secondsText(v) : Math.round(v).toLocaleString(), xs(v), H - 6);
      }
      ctx.save();
      ctx.beginPath(); ctx.rect(L, T, W - L - R, H - T - B); ctx.clip();
      // Steps: the state after point i holds until point i + 1.
      const step = (i) => xs(i + 1 < pts.length ? xOf(pts[i + 1]) : xOf(pts[i]));
      ctx.fillStyle = "#c8c8c8";
      ctx.beginPath();
      ctx.moveTo(xs(xOf(pts[0])), ys(0));
      pts.forEach((p, i) => { ctx.lineTo(xs(xOf(p)), ys(p[3])); ctx.lineTo(step(i), ys(p[3])); });
      ctx.lineTo(step(pts.length - 1), ys(0));
      ctx.fill();
      const paths = bands.map(() => []);  // per band: [x from, x to, bottom, top] per point it is live at
      live.forEach((row, i) => row.forEach(([b, y0, y1]) => paths[b].push([xs(xOf(pts[i])), step(i), y0, y1])));
      paths.forEach((segs, b) => {
        if (!segs.length) return;
        ctx.fillStyle = FS.hashColor(bands[b].name || String(bands[b].id));
        ctx.beginPath();
        segs.forEach(([a, z, y0, y1]) => ctx.rect(a, ys(y1), Math.max(0.5, z - a), ys(y0) - ys(y1)));
        ctx.fill();
        if (b === pin) {
          ctx.strokeStyle = "#000";
          ctx.lineWidth = 1.5;
          segs.forEach(([a, z, y0, y1]) => ctx.strokeRect(a, ys(y1), Math.max(0.5, z - a), ys(y0) - ys(y1)));
          ctx.lineWidth = 1;
        }
      });
      // The trace's marks and this device's OOMs, on the same axis.
      ctx.strokeStyle = "#999";
      h.marks.forEach((m) => {
        const x = xs(view.time ? m[1] * h.seconds_per_tick : m[0]);
        if (x < L || x > W - R) return;
        ctx.beginPath(); ctx.moveTo(x, T); ctx.lineTo(x, H - B); ctx.stroke();
      });
      ctx.fillStyle = "#d62728";
      h.ooms.filter((o) => o[2] === dev.device && o[3] === dev.space).forEach((o) => {
        const x = xs(view.time ? o[1] * h.seconds_per_tick : o[0]);
        ctx.beginPath(); ctx.moveTo(x, T); ctx.lineTo(x - 5, T - 8 + 8); ctx.lineTo(x + 5, T); ctx.fill();
        ctx.fillRect(x - 1, T, 2, H - T - B);
      });
      ctx.restore();
    }
    redraws.push(draw);
    // The point at a mouse x (the last at or before it) and the band under y.
    const hit = (evt) => {
      const rect = c.getBoundingClientRect();
      const px = ((evt.clientX - rect.left) / rect.width) * W, py = ((evt.clientY - rect.top) / rect.height) * H;
      if (px < L || px > W - R) return null;
      const x = x0 + ((px - L) / (W - L - R)) * (x1 - x0);
      let lo = 0, hi = pts.length;
      while (lo < hi) { const m = (lo + hi) >> 1; if (xOf(pts[m]) <= x) lo = m + 1; else hi = m; }
      const i = lo - 1;
      if (i < 0) return { point: -1, band: -1, other: false };  // before the device's first buffer
      const y = ((H - B - py) / (H - T - B)) * yMax;
      const band = live[i].find(([, y0, y1]) => y >= y0 && y < y1);
      return { point: i, band: band ? band[0] : -1, other: !band && y >= 0 && y < pts[i][3], y: y };
    };
    const describe = (hv) => {
      if (hv.point < 0) return ["before event " + pts[0][0] + ": no buffer of this device and space was live yet"];
      const p = pts[hv.point];
      const head = "after event " + p[0] + inText(h, p[1]) + ": live " + bytes(p[2]);
      if (hv.band >= 0) return [head].concat(bufferLines(h, bands[hv.band]));
      if (hv.other) return [head, "other buffers (not drawn one by one): " + bytes(p[3])];
      return [head];
    };
    c.addEventListener("mousemove", (evt) => {
      const hv = hit(evt);
      if (!hv) { FS.hideTip(); return; }
      FS.showTip(evt, describe(hv));
    });
    c.addEventListener("mouseleave", FS.hideTip);
    c.addEventListener("click", (evt) => {
      const hv = hit(evt);
      pin = hv && hv.band >= 0 && hv.band !== pin ? hv.band : -1;
      pinned.textContent = pin >= 0 ? "pinned: " + bufferLines(h, bands[pin]).join("\n") : "";
      draw();
    });
    let dragFrom = null;
    const xAt = (evt) => {
      const rect = c.getBoundingClientRect();
      return x0 + ((((evt.clientX - rect.left) / rect.width) * W - L) / (W - L - R)) * (x1 - x0);
    };
    c.addEventListener("mousedown", (evt) => { dragFrom = xAt(evt); });
    c.addEventListener("mouseup", (evt) => {
      const x = xAt(evt);
      if (dragFrom !== null && Math.abs(x - dragFrom) > (x1 - x0) / 100) {
        view.x0 = Math.min(dragFrom, x);
        view.x1 = Math.max(dragFrom, x);
        redraws.forEach((f) => f());
      }
      dragFrom = null;
    });
    c.addEventListener("dblclick", () => { view.x0 = view.x1 = null; redraws.forEach((f) => f()); });
    draw();
    if (FS.probing) {  // hover across the chart: what answers must be live there, and named
      const rect = c.getBoundingClientRect();
      const res = { buffers_chart: FS.keyOf(dev), probes: 0, answered: 0, bands: 0, named: 0, live_ok: 0 };
      for (let k2 = 1; k2 < 40; k2++)
        for (const fy of [0.2, 0.5, 0.85]) {
          const evt = { clientX: Math.round(rect.left + rect.width * ((L + (W - L - R) * k2 / 40) / W)),
            clientY: Math.round(rect.top + rect.height * fy) };
          FS.tip.style.display = "none";
          c.dispatchEvent(new MouseEvent("mousemove", evt));
          res.probes++;
          if (FS.tip.style.display === "block") res.answered++;
          const hv = hit(evt);
          if (hv && hv.band >= 0) {
            res.bands++;
            const b = bands[hv.band], e = pts[hv.point][0];
            if (FS.tip.textContent.includes("buffer: " + (b.name || "id " + b.id))) res.named++;
            if (b.alloc <= e && (b.free < 0 || e < b.free)) res.live_ok++;
          }
        }
      FS.hideTip();
      FS.probeOut.push(res);
    }
  }
  runs.forEach((r) => r.history.timelines.forEach((tl) => { if (tl.points.length) chart(r, tl); }));
  [xEvent, xTime].forEach((x) => x.addEventListener("change", () => {
    view.time = xTime.checked;
    view.x0 = view.x1 = null;
    redraws.forEach((f) => f());
  }));
  const h0 = runs[0].history;
  box.appendChild(el("p", { class: "note" },
    "Each band is one buffer from its allocation to its free, stacked in allocation order (a band falls when one " +
    "below it is freed); grey: every other live buffer. The top is the live bytes (Σ block sizes) after each event. " +
    "Vertical lines: the trace's marks; red: OOMs. Drag to zoom, double-click to reset; hover a band for its " +
    "buffer, click to pin it." + (h0.window ? " Window: " + h0.window + "." : "")));
})();
