// The allocator's state at any event (issue 24): a scrubber (slider, arrow keys, previous/next
// change, bookmarks at each space's peak and each OOM) that redraws the address map of every
// region of every device and space at the chosen event — blocks in use (with the padding beyond
// each request hatched), free blocks, unmapped reserved space — with hover for the buffer and its
// stack. fragsim wrote keyframes (every region's blocks at chosen events) and, inside its exact
// ranges, every change as a delta (history.keyframes, history.deltas, history.exact); the state
// after event e is the keyframe at or before e with the deltas up to e applied: a block placed
// carves its free block, a block freed joins its free neighbours, a region written whole
// replaces the one at its base. Outside the exact ranges the nearest keyframe before e is shown,
// and said so. The figures shown are fragsim's (the keyframe's or the delta's).
"use strict";
(function () {
  const FS = window.FS, data = FS.data, el = FS.el, bytes = FS.bytes, pct = FS.pct;
  const runs = data.runs.filter((r) => r.history && r.history.keyframes.length);
  const box = document.getElementById("states");
  if (!runs.length) return;
  box.appendChild(el("h2", {}, "Allocator state at any event"));
  const hex = (a) => "0x" + a.toString(16);

  // A region from its JSON ([base, size, id, [gap, size, kind, buffer, ...]]) as blocks with addresses.
  function region(j) {
    const blocks = [];
    let at = j[0];
    for (let i = 0; i < j[3].length; i += 4) {
      const a = at + j[3][i];
      blocks.push([a, j[3][i + 1], j[3][i + 2], j[3][i + 3]]);
      at = a + j[3][i + 1];
    }
    return { base: j[0], size: j[1], id: j[2], blocks: blocks };
  }
  function bsearch(arr, v, key) {  // index of the last element with key(x) <= v, -1 when none
    let lo = 0, hi = arr.length;
    while (lo < hi) { const m = (lo + hi) >> 1; if (key(arr[m]) <= v) lo = m + 1; else hi = m; }
    return lo - 1;
  }
  // The state a keyframe holds: per slot its regions (address order) and figures.
  function fromKeyframe(k) {
    return { event: k.event, slots: k.slots.map((s) => ({ regions: s.regions.map(region), figures: s.figures,
      truncated: s.truncated })) };
  }
  function slotOf(st, i) {
    while (st.slots.length <= i) st.slots.push({ regions: [], figures: null, truncated: false });
    return st.slots[i];
  }
  // One delta change, applied to the state.
  function apply(st, c) {
    const s = slotOf(st, c[0]), kind = c[1];
    if (kind === 2 || kind === 3) {
      const base = kind === 2 ? c[2][0] : c[2];
      const i = bsearch(s.regions, base, (g) => g.base);
      const same = i >= 0 && s.regions[i].base === base;
      if (kind === 3) { if (same) s.regions.splice(i, 1); return true; }
      if (same) s.regions[i] = region(c[2]); else s.regions.splice(i + 1, 0, region(c[2]));
      return true;
    }
    const addr = c[2], size = c[3];
    const gi = bsearch(s.regions, addr, (g) => g.base);
    if (gi < 0 || addr >= s.regions[gi].base + s.regions[gi].size) return false;  // its region comes whole next
    const bl = s.regions[gi].blocks;
    const bi = bsearch(bl, addr, (b) => b[0]);
    if (bi < 0) return false;
    const b = bl[bi];
    if (kind === 0) {  // placed: carve it out of the free block that holds it
      if (b[2] !== 0 || addr + size > b[0] + b[1]) return false;
      const parts = [];
      if (addr > b[0]) parts.push([b[0], addr - b[0], 0, -1]);
      parts.push([addr, size, 1, c[4]]);
      if (addr + size < b[0] + b[1]) parts.push([addr + size, b[0] + b[1] - addr - size, 0, -1]);
      bl.splice(bi, 1, ...parts);
      return true;
    }
    if (b[0] !== addr || b[2] !== 1) return false;  // freed: it joins its free neighbours
    let lo = bi, start = addr, end = addr + b[1];
    if (bi > 0 && bl[bi - 1][2] === 0 && bl[bi - 1][0] + bl[bi - 1][1] === addr) { lo = bi - 1; start = bl[bi - 1][0]; }
    let hi = bi;
    if (bi + 1 < bl.length && bl[bi + 1][2] === 0 && bl[bi + 1][0] === end) { hi = bi + 1; end = bl[bi + 1][0] + bl[bi + 1][1]; }
    bl.splice(lo, hi - lo + 1, [start, end - start, 0, -1]);
    return true;
  }
  function applyEvent(st, d) {
    d[2].forEach((c) => apply(st, c));
    d[3].forEach((f) => { slotOf(st, f[0]).figures = f; });
    st.event = d[0];
  }
  FS.stateOf = fromKeyframe;
  FS.applyDelta = applyEvent;

  function scrubber(r) {
    const h = r.history, rep = r.report;
    const kfs = h.keyframes, deltas = h.deltas;
    const wrap = el("div", { class: "statebox" });
    wrap.appendChild(el("h3", {}, FS.runName(r) + ": allocator state"));
    const bar = el("div", { class: "controls scrubber" });
    const prev = el("button", { class: "prev-change", title: "previous change (shift+left)" }, "◀ change");
    const slider = el("input", { type: "range", class: "scrub", min: h.first, max: h.last, step: 1, value: h.first, style: "width:560px" });
    const next = el("button", { class: "next-change", title: "next change (shift+right)" }, "change ▶");
    const num = el("input", { type: "number", class: "scrub-event", min: h.first, max: h.last, value: h.first, style: "width:8em" });
    [prev, slider, next, el("span", {}, " event "), num].forEach((x) => bar.appendChild(x));
    wrap.appendChild(bar);
    const marks = el("div", { class: "controls bookmarks" });
    marks.appendChild(el("span", {}, "bookmarks: "));
    const bookmarks = [];
    if (rep.devices.length > 1) {
      rep.devices.forEach((d) => { if (d.at_peak_allocated) bookmarks.push(["peak of " + FS.where(d), d.at_peak_allocated.event_index]); });
    } else if (rep.at_peak_allocated) {
      bookmarks.push(["peak allocated", rep.at_peak_allocated.event_index]);
    }
    rep.ooms.slice(0, 10).forEach((o) => bookmarks.push(["OOM at event " + o.event_index + " (" + FS.where(o) + ")", o.event_index]));
    bookmarks.filter((b) => b[1] >= h.first && b[1] <= h.last).forEach(([name, e]) => {
      const b = el("button", { class: "bookmark", "data-event": e }, name);
      b.addEventListener("click", () => go(e));
      marks.appendChild(b);
    });
    wrap.appendChild(marks);
    const status = el("div", { class: "note scrub-status" });
    wrap.appendChild(status);
    const target = el("div", { class: "state-maps" });
    wrap.appendChild(target);
    box.appendChild(wrap);
    const byBuffer = new Map();  // history buffer index → its object, as the maps' hover wants it
    function bufferView(i) {
      if (i < 0) return null;
      let v = byBuffer.get(i);
      if (!v) {
        const b = FS.historyBuffer ? FS.historyBuffer(h, i) : null;
        if (!b) return null;
        v = { id: b.id, name: b.name, shape: b.shape, requested: b.requested, block: b.block, event_index: b.alloc,
          stack: String(b.stack), freed: b.free >= 0 ? b.free : undefined };
        byBuffer.set(i, v);
      }
      return v;
    }
    // An allocation of the log as the maps' hover wants it.
    function logView(slot, i) {
      const x = FS.entry(FS.logOf(r)[slot], i);
      return { id: x.id, name: x.name, shape: x.shape, requested: x.requested, block: x.block, event_index: x.allocEvent,
        stack: String(x.stack), freed: isFinite(x.freeEvent) ? x.freeEvent : undefined };
    }
    const inExact = (e) => h.exact.some((x) => e >= x[0] && e <= x[1]);
    let cache = null;  // the last state built: {state, keyframe index}
    // The state after event e: the keyframe at or before it, then the deltas up to e (in an exact
    // range); elsewhere, built from every allocation live then and the regions held then.
    function stateAt(e) {
      const exact = inExact(e);
      const ki = bsearch(kfs, e, (k) => k.event);
      if (!exact) {
        const built = fromLog(e, ki);
        if (built) return { state: built, exact: true, keyframe: ki, fromLog: true };
        return { state: ki >= 0 ? fromKeyframe(kfs[ki]) : { event: h.first, slots: [] }, exact: false, keyframe: ki };
      }
      let st, from;
      if (cache && cache.exact && cache.keyframe === ki && cache.state.event <= e) {
        st = cache.state;
        from = st.event;
      } else {
        st = ki >= 0 ? fromKeyframe(kfs[ki]) : { event: -1, slots: [] };
        from = st.event;
      }
      let di = bsearch(deltas, from, (d) => d[0]) + 1;
      for (; di < deltas.length && deltas[di][0] <= e; di++) applyEvent(st, deltas[di]);
      st.event = e;
      cache = { state: st, exact: true, keyframe: ki };
      return cache;
    }
    // The state after event e from the run's allocation and region logs: each region held then
    // (its unmapped parts as at the keyframe before, when it was mapped as much then), every
    // allocation live then at its address, free space between; the figures computed from that.
    // null when a log is missing, cut short before e, or a region's mapping moved since.
    const regionLog = FS.regionsOf(r);
    function fromLog(e, ki) {
      const log = FS.logOf(r);  // (decoded when first read)
      if (!log || !regionLog.length || (h.regions_cut_at >= 0 && e >= h.regions_cut_at) ||
          (h.allocations.cut_at >= 0 && e >= h.allocations.cut_at)) return null;
      const k = ki >= 0 ? fromKeyframe(kfs[ki]) : null;
      const st = { event: e, slots: [] };
      for (let si = 0; si < h.slots.length; si++) {
        const regs = regionLog.filter((g) => g.slot === si && g.obtained <= e && e < g.released).sort((a, b) => a.base - b.base);
        const kept = k && k.slots[si] ? k.slots[si].regions : [];
        const s = log[si];
        const live = [];  // [addr, size, ordinal] of allocations live after e
        const ad = s ? s.addr : null;
        if (s) for (let i = 0; i < s.n && s.aEv[i] <= e; i++) if (s.fEv[i] > e && !isNaN(ad[i])) live.push([ad[i], s.block[i], i]);
        live.sort((a, b) => a[0] - b[0]);
        let allocated = 0, reserved = 0, largest = 0, free = 0, li = 0;
        const regions = [];
        for (const g of regs) {
          const [mapped] = FS.usageAt(g, e);
          const before = kept.find((x) => x.base === g.base && x.size === g.size);
          let unmapped = [];  // [addr, size]
          if (mapped < g.size) {
            if (!before) return null;
            const um = before.blocks.filter((b) => b[2] === 2);
            if (um.reduce((a, b) => a + b[1], 0) !== g.size - mapped) return null;
            unmapped = um.map((b) => [b[0], b[1]]);
          }
          const blocks = [];
          let at = g.base, ui = 0;
          const gap = (to) => {  // free and unmapped space from `at` up to `to`
            while (at < to) {
              while (ui < unmapped.length && unmapped[ui][0] + unmapped[ui][1] <= at) ui++;
              const u = ui < unmapped.length ? unmapped[ui] : null;
              if (u && u[0] <= at) {
                const end = Math.min(to, u[0] + u[1]);
                blocks.push([at, end - at, 2, -1]);
                at = end;
              } else {
                const end = Math.min(to, u ? u[0] : to);
                blocks.push([at, end - at, 0, -1]);
                free += end - at;
                largest = Math.max(largest, end - at);
                at = end;
              }
            }
          };
          while (li < live.length && live[li][0] < g.base) li++;
          for (; li < live.length && live[li][0] < g.base + g.size; li++) {
            const [a, size, i] = live[li];
            gap(a);
            blocks.push([a, size, 1, -2 - i]);
            allocated += size;
            at = Math.max(at, a + size);
          }
          gap(g.base + g.size);
          // Adjacent free blocks are one (as the allocators coalesce them).
          const merged = [];
          blocks.forEach((b) => {
            const p = merged[merged.length - 1];
            if (p && p[2] === b[2] && b[2] !== 1 && p[0] + p[1] === b[0]) p[1] += b[1];
            else merged.push(b.slice());
          });
          merged.forEach((b) => { if (b[2] === 0) largest = Math.max(largest, b[1]); });
          reserved += mapped;
          regions.push({ base: g.base, size: g.size, id: g.id, blocks: merged });
        }
        const ext = free > 0 ? (free - largest) / free : 0;
        st.slots.push({ regions: regions, figures: [si, allocated, reserved, largest, ext], truncated: false, built: true });
      }
      return st;
    }
    FS.stateFromLog = FS.stateFromLog || new Map();
    FS.stateFromLog.set(r, fromLog);
    FS.stateAt = FS.stateAt || new Map();
    FS.stateAt.set(r, stateAt);
    let current = h.first;
    function render(e) {
      current = e;
      const got = stateAt(e);
      const st = got.state;
      slider.value = e;
      num.value = e;
      const k = got.keyframe >= 0 ? kfs[got.keyframe] : null;
      // " (0.001250 s in, MORE)": the time only where the trace records times.
      const at = (ticks, more) => {
        const parts = h.timed === false ? [] : [(ticks * h.seconds_per_tick).toFixed(6) + " s in"];
        if (more) parts.push(more);
        return parts.length ? " (" + parts.join(", ") + ")" : "";
      };
      const di = bsearch(deltas, e, (d) => d[0]);
      const t = got.exact ? (di >= 0 && (!k || deltas[di][0] > k.event) ? deltas[di][1] : k ? k.t : 0) : k ? k.t : 0;
      status.textContent = "after event " + e.toLocaleString() + (got.fromLog
        ? at(FS.logOf(r) && FS.logOf(r)[0] ? FS.clock(r, FS.logOf(r).find((x) => x)).timeOf(e) / h.seconds_per_tick : 0,
          "") +
          " — exact: every allocation live then at its address, in the regions held then (figures computed from them)"
        : got.exact ? at(t, "at its last change") + " — exact: every change up to this event is applied"
        : k ? " — not kept change by change here: the state shown is fragsim's snapshot after event " + k.event.toLocaleString() +
          at(k.t, "") + "; `--from`/`--to` around it keeps every event" : " — nothing recorded before it");
      status.setAttribute("data-event", e);
      status.setAttribute("data-shown", got.exact ? e : k ? k.event : -1);
      while (target.firstChild) target.removeChild(target.firstChild);
      st.slots.forEach((s, si) => {
        if (!h.slots[si]) return;
        const sp = { device: h.slots[si][0], space: h.slots[si][1], truncated: s.truncated, regions: [], blocks: [] };
        const f = s.figures;
        target.appendChild(el("div", { class: "maptitle" }, FS.where(sp) + (f ? ": " + bytes(f[1]) + " allocated of " +
          bytes(f[2]) + " reserved; largest free block in reserved memory " + bytes(f[3]) + "; external fragmentation " +
          pct(f[4]) : "") + (s.truncated ? " (map truncated)" : "")));
        const byAddr = new Map();
        s.regions.forEach((g) => {
          sp.regions.push([hex(g.base), g.size, g.id]);
          g.blocks.forEach((b) => {
            sp.blocks.push([b[0] - g.base, b[1], b[2] === 1, b[2] !== 2, g.id, hex(b[0])]);
            const v = b[2] !== 1 ? null : b[3] <= -2 ? logView(si, -2 - b[3]) : bufferView(b[3]);
            if (v) byAddr.set(hex(b[0]), v);
          });
        });
        if (sp.regions.length) FS.drawMap(target, sp, byAddr, FS.highlight);
        else target.appendChild(el("div", { class: "regionlabel" }, "no memory held"));
      });
      (FS.onScrub || []).forEach((fn) => fn(r, e, k));
    }
    function go(e) { render(Math.max(h.first, Math.min(h.last, Math.round(e)))); }
    // The previous or next event at which something changed (a delta or a keyframe).
    function change(dir) {
      const evs = deltas.map((d) => d[0]).concat(kfs.map((k) => k.event));
      let best = null;
      evs.forEach((x) => { if (dir > 0 ? x > current && (best === null || x < best) : x < current && (best === null || x > best)) best = x; });
      if (best !== null) go(best);
    }
    slider.addEventListener("input", () => go(Number(slider.value)));
    num.addEventListener("change", () => go(Number(num.value)));
    prev.addEventListener("click", () => change(-1));
    next.addEventListener("click", () => change(1));
    slider.addEventListener("keydown", (evt) => {
      if (!evt.shiftKey || (evt.key !== "ArrowLeft" && evt.key !== "ArrowRight")) return;
      evt.preventDefault();
      change(evt.key === "ArrowRight" ? 1 : -1);
    });
    FS.whenShown(slider, () => {
      go(bookmarks.length && bookmarks[0][1] >= h.first && bookmarks[0][1] <= h.last ? bookmarks[0][1] : h.first);
      if (FS.probing) probe(r, stateAt, go, slider, status);
    });
  }

  // #probe: each keyframe inside an exact range, rebuilt from the keyframe before it and the
  // deltas between, must equal itself; moving the slider must redraw; the maps must answer hover.
  function probe(r, stateAt, go, slider, status) {
    const h = r.history, res = { states: r.label, rebuilt: 0, agree: 0, moved: 0, first_diff: "" };
    const same = (a, b) => JSON.stringify(a.slots.map((s) => s.regions)) === JSON.stringify(b.slots.map((s) => s.regions));
    for (let i = 1; i < h.keyframes.length; i++) {
      const a = h.keyframes[i - 1], b = h.keyframes[i];
      if (!h.exact.some((x) => a.event + 1 >= x[0] && b.event <= x[1])) continue;
      const st = fromKeyframe(a);
      h.deltas.filter((d) => d[0] > a.event && d[0] <= b.event).forEach((d) => applyEvent(st, d));
      const want = fromKeyframe(b);
      while (st.slots.length < want.slots.length) slotOf(st, st.slots.length);
      res.rebuilt++;
      if (same(st, want)) res.agree++;
      else if (!res.first_diff) res.first_diff = "keyframe at event " + b.event;
    }
    for (const e of [h.first, Math.floor((h.first + h.last) / 2), h.last]) {
      slider.value = e;
      slider.dispatchEvent(new Event("input"));
      if (status.getAttribute("data-event") === String(e)) res.moved++;
    }
    FS.probeOut.push(res);
    // Every keyframe fragsim wrote, built again from the allocation and region logs: the same
    // blocks in use at the same addresses, the same allocated and reserved bytes.
    const fromLog = FS.stateFromLog.get(r), built = { states_from_log: r.label, compared: 0, agree: 0, first_diff: "" };
    h.keyframes.forEach((k, ki) => {  // (the keyframe lends only where unmapped space lies)
      const got = fromLog(k.event, ki), want = fromKeyframe(k);
      if (!got || want.slots.some((s) => s.truncated)) return;
      built.compared++;
      const inUse = (st) => JSON.stringify(st.slots.map((s) => s.regions.map((g) => [g.base, g.size,
        g.blocks.filter((b) => b[2] === 1).map((b) => [b[0], b[1]])])));
      const figs = (st) => JSON.stringify(st.slots.map((s) => (s.figures ? [s.figures[1], s.figures[2]] : [0, 0])));
      // (a slot the keyframe does not have yet is one with nothing in it)
      while (got.slots.length < want.slots.length) got.slots.push({ regions: [], figures: null });
      while (want.slots.length < got.slots.length) want.slots.push({ regions: [], figures: null });
      if (inUse(got) === inUse(want) && figs(got) === figs(want)) built.agree++;
      else if (!built.first_diff) built.first_diff = "keyframe at event " + k.event;
    });
    FS.probeOut.push(built);
    go(h.first);
    FS.probeMaps();
  }
  runs.forEach(scrubber);
  box.appendChild(el("p", { class: "note" },
    "Drag the slider or use the arrow keys on it (shift+arrow: the previous or next change); the bookmarks jump to " +
    "each space's peak and each OOM. Every region of every device and space, in address order: coloured blocks are " +
    "buffers in use (hatched: padding or rounding beyond the request), white: free, grey: reserved but unmapped. " +
    "Hover a block for its buffer and stack."));
})();
