// Live memory over time, every allocation drawn (issue 51): per run and device and space, each
// allocation the run placed is a band from its allocation to its free, stacked on the allocations
// made before it that are still live (a band falls when one below it is freed), so that the top
// is the live bytes (Σ block sizes). fragsim wrote every allocation (history.allocations); the
// level of detail is the stack chart's (viewer_stack.js): what is thinner than a pixel is merged
// in grey at its place, and zooming separates it. Hover a band: its entries; click pins them. The
// trace's marks, the program's actions (empty_cache) and the OOMs are on the same axis; a run
// that stopped at its first OOM ends there. x is the event index or the time.
"use strict";
(function () {
  const FS = window.FS, data = FS.data, el = FS.el, bytes = FS.bytes;
  // (the logs are decoded when a chart first comes near the screen: FS.whenShown)
  const runs = data.runs.filter((r) => r.history && r.history.allocations && r.history.allocations.slots.length);
  const box = document.getElementById("buffers");

  // A buffer of history.buffers as a readable object (the scrubber's maps name their blocks' buffers).
  function buffer(h, i) {
    const b = h.buffers[i];
    return { index: i, id: b[0], slot: b[1], alloc: b[2], allocT: b[3], free: b[4], freeT: b[5], requested: b[6],
      block: b[7], name: b[8] >= 0 ? h.strings[b[8]] : "", stack: b[9], shape: b[10] >= 0 ? h.strings[b[10]] : "",
      addr: b[11], padding: b[12], livedEvents: b[13], livedTicks: b[14] };
  }
  // " (1.250 ms in)": a time from the first event, "" where the trace records no times.
  function inText(h, ticks) {
    return h.timed === false ? "" : " (" + FS.secondsText(ticks * h.seconds_per_tick) + " in)";
  }
  FS.inText = inText;
  FS.historyBuffer = buffer;
  // Binary search: the first index in [0, n) whose value (get) is >= v.
  function lowerBound(n, get, v) {
    let lo = 0, hi = n;
    while (lo < hi) { const m = (lo + hi) >> 1; if (get(m) < v) lo = m + 1; else hi = m; }
    return lo;
  }
  // The vertical lines of a slot's charts: marks (grey), actions (brown, dashed), OOMs (red).
  function marksOf(r, device, space) {
    const h = r.history, out = [];
    h.marks.forEach((m) => out.push([m[0], "#bbb", m[2]]));
    FS.actionsOf(r).forEach((a) => out.push([a.event_index, "#8c564b", a.name, [3, 2]]));
    h.ooms.filter((o) => o[2] === device && o[3] === space).forEach((o) => out.push([o[0], "#d62728", "OOM"]));
    return out;
  }
  FS.marksOf = marksOf;
  // Event ↔ time of a slot, by its allocations (exact at each allocation's event).
  function clock(r, s) {
    const h = r.history, spt = h.seconds_per_tick;
    return {
      timeOf: (e) => {
        const i = lowerBound(s.n, (k) => s.aEv[k], e + 1) - 1;
        return i < 0 ? 0 : s.aT[i] * spt;
      },
      eventAt: (t) => {
        const aT = s.aT;
        const i = lowerBound(s.n, (k) => aT[k] * spt, t);
        return i >= s.n ? FS.runEnd(r) + 1 : s.aEv[i];
      },
    };
  }
  FS.clock = clock;
  if (!runs.length) {
    // A window (--from/--to) that holds no allocation: the section says so rather than vanish.
    const empty = data.runs.find((r) => r.history && r.history.allocations && r.history.window);
    if (empty) {
      box.appendChild(el("h2", {}, "Live memory over time, every allocation"));
      box.appendChild(el("p", { class: "note" }, "No allocation in the events shown. Window: " + empty.history.window +
        "."));
    }
    return;
  }
  box.appendChild(el("h2", {}, "Live memory over time, every allocation"));
  const controls = el("div", { class: "controls" });
  controls.appendChild(el("span", {}, "x axis: "));
  const xEvent = el("input", { type: "radio", name: "bufx", id: "bufx-event", checked: "" });
  const xTime = el("input", { type: "radio", name: "bufx", id: "bufx-time" });
  controls.appendChild(xEvent);
  controls.appendChild(el("label", { for: "bufx-event" }, " event index "));
  controls.appendChild(xTime);
  // A trace that records no times (its t are event numbers) offers no time axis.
  const untimed = runs.every((r) => r.history.timed === false);
  if (untimed) xTime.disabled = true;
  controls.appendChild(el("label", { for: "bufx-time" }, " time from the first event" +
    (untimed ? " (the trace records no times)" : "")));
  box.appendChild(controls);

  // The hash an allocation with neither name nor stack is coloured and grouped by (color and
  // colorKey below): FS.hashColor's hash of "#" + i, the colour such bands always had, made
  // without the string ("#", then i's decimal digits).
  function idHash(i) {
    let h = 35, p = 1;
    while (p * 10 <= i) p *= 10;
    for (; p >= 1; p /= 10) h = (h * 31 + 48 + (Math.floor(i / p) % 10)) | 0;
    return h;
  }
  const charts = [];
  function chart(r, k, count) {
    const h = r.history, slot = h.slots[k], dev = { device: slot[0], space: slot[1] };
    const wrap = el("div", { class: "bufbox" });
    const cut = h.allocations.cut_at >= 0 ? " — kept up to event " + h.allocations.cut_at + " (the page's budget)" : "";
    wrap.appendChild(el("h3", {}, (data.runs.length > 1 ? FS.runName(r) + " — " : "") + FS.where(dev) + ": " +
      count.toLocaleString() + " allocations, each drawn" + cut));
    box.appendChild(wrap);
    const room = el("div", { class: "bufroom" });  // the chart's height until it is drawn
    room.style.height = "290px";
    wrap.appendChild(room);
    FS.whenShown(wrap, () => {
      wrap.removeChild(room);
      draw(r, FS.logOf(r)[k], wrap, dev);
    });
  }
  function draw(r, s, wrap, dev) {
    const h = r.history;
    const cl = clock(r, s);
    const step = [0, 0, 0];  // the change returned by next() (reused)
    const src = {
      n: s.n,
      start: (E, cur) => {
        const end = lowerBound(s.n, (k) => s.aEv[k], E);
        cur.fill(0);
        for (let i = 0; i < end; i++) if (s.fEv[i] >= E) cur[i] = s.block[i];
      },
      changes: (E) => {
        let ai = lowerBound(s.n, (k) => s.aEv[k], E);
        let fi = lowerBound(s.freeOrder.length, (k) => s.fEv[s.freeOrder[k]], E);
        return {
          next: () => {
            const ea = ai < s.n ? s.aEv[ai] : Infinity;
            const ef = fi < s.freeOrder.length ? s.fEv[s.freeOrder[fi]] : Infinity;
            if (ea === Infinity && ef === Infinity) return null;
            if (ea <= ef) { step[0] = ea; step[1] = ai; step[2] = s.block[ai]; ai++; }
            else { step[0] = ef; step[1] = s.freeOrder[fi]; step[2] = 0; fi++; }
            return step;
          },
        };
      },
      // By call site (its name, else its innermost frame), a little lighter or darker by the
      // allocation's parity so that neighbours of one site stay apart; by allocation without either.
      // Each column's highest live total and the event after which it stood (the chart's pass 1,
      // walking allocations and frees in event order without the chart's per-item state).
      peaks: (E, total, peak, at) => {
        const pw = peak.length, fo = s.freeOrder, nfo = fo.length, aEv = s.aEv, fEv = s.fEv, block = s.block;
        let ai = lowerBound(s.n, (k) => aEv[k], E[0]), fi = lowerBound(nfo, (k) => fEv[fo[k]], E[0]);
        let ea = ai < s.n ? aEv[ai] : Infinity, ef = fi < nfo ? fEv[fo[fi]] : Infinity;
        for (let k = 0; k < pw; k++) {
          const end = E[k + 1];
          // The state carried in counts when nothing changes at the column's first event.
          let best = ea === E[k] || ef === E[k] ? -Infinity : total, bestAt = -1;
          while (ea < end || ef < end) {
            let e;
            if (ea <= ef) {
              e = ea;
              total += block[ai++];
              ea = ai < s.n ? aEv[ai] : Infinity;
            } else {
              e = ef;
              total -= block[fo[fi++]];
              ef = fi < nfo ? fEv[fo[fi]] : Infinity;
            }
            if (total > best) { best = total; bestAt = e; }
          }
          peak[k] = best === -Infinity ? total : best;
          at[k] = bestAt;
        }
      },
      // (the key is a number: a string a band, made each column, cost more than the fill; an
      // allocation without either is keyed by the hue and tone its colour has, 720 of them)
      colorKey: (i) => (s.key[i] !== -2147483648 ? s.key[i] * 2 + (i & 1) : 1e12 + (Math.abs(idHash(i)) % 360) * 2 + (i & 1)),
      color: (i) => {
        const k = s.key[i], tone = i & 1 ? 62 : 50;
        if (k >= 0) return FS.hashColor(h.allocations.names[k], tone);
        if (k !== -2147483648) return FS.hashColor((data.stacks[-1 - k] || [String(-1 - k)])[0], tone);
        return FS.hueColor(idHash(i), tone);
      },
      match: () => FS.search.of(r, s.slot),
      lines: (item, e) => {
        const head = "after event " + e + (h.timed === false ? "" : " (" + FS.secondsText(cl.timeOf(e)) + " in)");
        if (item === null) return [head];
        if (item < 0) return [head, "allocations thinner than a pixel here, merged: zoom in (on time or bytes) to " +
          "see them one by one"];
        return [head].concat(FS.entryLines(r, s, item));
      },
      pin: (i) => FS.pinAllocation(r, s, i),
      marks: marksOf(r, dev.device, dev.space),
      stop: FS.slotStop(h, s.slot),
      timeOf: h.timed === false ? null : cl.timeOf,
      eventAt: cl.eventAt,
    };
    const pinnedOf = () => {
      const p = FS.pinned();
      return p && p.run === r && p.slot === s.slot && p.ordinal !== undefined ? p.ordinal : -1;
    };
    const ch = FS.stackChart(wrap, { src: src, key: FS.keyOf(dev), cls: "bufchart", pinned: pinnedOf });
    charts.push({ run: r, slot: s, chart: ch, key: FS.keyOf(dev) });
  }
  runs.forEach((r) => {
    const h = r.history, counts = [];
    h.allocations.slots.forEach((js) => { counts[js.slot] = js.count; });
    const slots = h.slots.map((x, k) => k).sort((a, b) => FS.byDevice({ device: h.slots[a][0], space: h.slots[a][1] },
      { device: h.slots[b][0], space: h.slots[b][1] }));
    slots.forEach((k) => {
      if (counts[k]) return chart(r, k, counts[k]);
      const dev = { device: h.slots[k][0], space: h.slots[k][1] };  // a space where the run placed nothing
      box.appendChild(el("div", { class: "maptitle" }, (data.runs.length > 1 ? FS.runName(r) + " — " : "") +
        FS.where(dev) + ": no buffer placed"));
    });
  });
  [xEvent, xTime].forEach((x) => x.addEventListener("change", () => {
    FS.view.time = xTime.checked;
    FS.redraws.forEach((f) => f());
  }));
  const h0 = runs[0].history;
  box.appendChild(el("p", { class: "note" },
    "Every allocation the run placed is a band from its allocation to its free, stacked on those allocated before it " +
    "and still live (a band falls when one below it is freed); the top is the live bytes (Σ block sizes). Each pixel " +
    "column shows the stack after the column's highest event; allocations thinner than a pixel there are merged in " +
    "grey where they lie, and zooming in (drag across a chart, scroll; shift+scroll for bytes) draws them one by " +
    "one. Grey lines: the trace's marks; brown dashed: empty_cache and the recording's OOMs; red: OOMs; a pink " +
    "shade: after the run stopped. Hover a band for its entries, click to pin them." +
    (h0.window ? " Window: " + h0.window + "." : "")));

  // #probe: hover across each chart (every answer a live allocation there, named as its entry says),
  // then zoom, click a band and search, as a user would.
  if (!FS.probing) return;
  charts.forEach(({ run: r, slot: s, chart: ch, key }) => {
    const c = ch.canvas, rect = c.getBoundingClientRect();
    const res = { buffers_chart: key, probes: 0, answered: 0, bands: 0, named: 0, live_ok: 0 };
    const cols = ch.columns(), W0 = FS.widthOf(c.parentNode);
    for (let k2 = 1; k2 < 40; k2++)
      for (const fy of [0.2, 0.5, 0.85, -1]) {
        const x = Math.round(rect.left + rect.width * (0.08 + 0.9 * k2 / 40));
        let y = Math.round(rect.top + rect.height * fy);
        if (fy < 0) {  // the middle of the tallest band drawn on its own in that column
          const it = cols.at(Math.floor(((x - rect.left) / rect.width) * W0) - 70);
          let best = -1;
          for (let q = 0; it && q < it.length; q += 3) if (it[q + 2] >= 0 && (best < 0 || it[q + 1] - it[q] > it[best + 1] - it[best])) best = q;
          if (best < 0) continue;
          y = Math.round(rect.top + ch.yPixel((it[best] + it[best + 1]) / 2) * rect.height / 260);
        }
        const evt = { clientX: x, clientY: y };
        FS.tip.style.display = "none";
        c.dispatchEvent(new MouseEvent("mousemove", evt));
        res.probes++;
        if (FS.tip.style.display === "block") res.answered++;
        const hv = ch.hit(evt);
        if (hv && hv.item !== null && hv.item >= 0) {
          res.bands++;
          const e = FS.entry(s, hv.item);
          if (FS.tip.textContent.includes("buffer: " + (e.name || "id " + e.id))) res.named++;
          if (s.aEv[hv.item] <= hv.event && hv.event < s.fEv[hv.item]) res.live_ok++;
        }
      }
    FS.hideTip();
    FS.probeOut.push(res);
  });
  // Zoom: a wheel over the middle of the first chart narrows every chart's range.
  const first = charts[0], c0 = first.chart.canvas, rect0 = c0.getBoundingClientRect();
  const before = [Number(c0.getAttribute("data-x0")), Number(c0.getAttribute("data-x1"))];
  c0.dispatchEvent(new WheelEvent("wheel", { deltaY: -100, clientX: Math.round(rect0.left + rect0.width / 2),
    clientY: Math.round(rect0.top + rect0.height / 2), cancelable: true }));
  const after = [Number(c0.getAttribute("data-x0")), Number(c0.getAttribute("data-x1"))];
  const others = document.querySelectorAll("svg.chart, canvas.bufchart");
  let follow = 0;
  others.forEach((x) => { if (x.getAttribute("data-x0") === String(after[0]) && x.getAttribute("data-x1") === String(after[1])) follow++; });
  FS.probeOut.push({ zoom: first.key, before: before, after: after, charts: others.length, following: follow });
  FS.setX(FS.view.lo, FS.view.hi);
  // Click: a band drawn right of the chart's middle, clicked where it is drawn, pins its entries.
  let clicked = { click: first.key, pinned: false };
  const cols = first.chart.columns(), W0 = FS.widthOf(c0.parentNode);  // {length, at(k)}
  for (let k = Math.floor(cols.length / 2); k < cols.length && !clicked.pinned; k++) {
    const ev = { clientX: Math.round(rect0.left + (70 + k + 0.5) * rect0.width / W0), clientY: 0 };
    for (let py = 2; py < rect0.height && !clicked.pinned; py += 2) {
      ev.clientY = Math.round(rect0.top + py);
      const hv = first.chart.hit(ev);
      if (!hv || hv.item === null || hv.item < 0) continue;
      const i = hv.item;
      c0.dispatchEvent(new MouseEvent("click", ev));
      const p = FS.pinned(), text = document.querySelector("#pinned pre").textContent;
      clicked = { click: first.key, pinned: !!p && p.ordinal === i, alloc_event: first.slot.aEv[i],
        shows_alloc: text.includes("alloc: event " + first.slot.aEv[i] + ","),
        shows_free: text.includes(isFinite(first.slot.fEv[i]) ? "free:  event " + first.slot.fEv[i] + "," : "free:  none"),
        shows_sizes: text.includes("requested ") && text.includes(", block ") };
    }
  }
  FS.probeOut.push(clicked);
  // Search: the name (else the size) of the largest allocation of the first chart highlights it.
  const s0 = first.slot;
  let big = 0;
  for (let i = 1; i < s0.n; i++) if (s0.block[i] > s0.block[big]) big = i;
  const e0 = FS.entry(s0, big);
  const query = e0.name && !/\s/.test(e0.name) ? e0.name : String(e0.requested) + "B";
  FS.runSearch(query);
  const m = FS.search.of(first.run, s0.slot);
  FS.probeOut.push({ search: query, count: FS.search.count, includes: !!m && m[big] === 1,
    drawn: Number(c0.getAttribute("data-matches-drawn")) });
  FS.runSearch("");
})();
