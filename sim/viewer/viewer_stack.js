// A stacked chart of lifetimes (issue 51), for every allocation of a device (the live-memory
// chart) and for every region it held (segments over time): each item is a band as tall as its
// bytes from the event that made it to the one that ended it, stacked on the items before it in
// their order (allocation or obtain order) that are still live, so that a band falls when one
// below it goes, and the top is the live total.
//
// Level of detail, per pixel column of the view: the column's events are replayed and the stack
// is drawn as it stood after the column's highest event (so every peak is drawn exactly); in it
// every item at least a pixel tall is drawn on its own, and each run of thinner items between two
// such is one grey band at its true place. Zooming in on time or bytes draws more of them on
// their own, down to every item at every event. A search match is always drawn on its own.
// The stack is kept in two trees of prefix sums over the items' order (bytes; items drawn on
// their own: Sums below) and a list of the items drawn on their own; a column walks only the
// bands above the lowest item that changed since the last column, so a view costs about
// O(items + changes in view + bands that move).
//
// src: {n, start(E, cur) → fills cur with each item's bytes after event E − 1, changes(E) → {next():
// [event, item, bytes] | null} in event order from event E, colorKey(i)/color(i), match() →
// Uint8Array|null, lines(i, e) → the hover's text, pin(i, e), fill(i, e) (optional: the share of
// item i drawn dark from its bottom after event e), peaks(E, total, peak, at) (optional: pass 1
// below, faster), marks: [[event, colour, title, dash]], stop
// (the last event replayed), timeOf(e)/eventAt(t) (the time axis)}.
"use strict";
(function () {
  const FS = window.FS, el = FS.el, bytes = FS.bytes;
  const L = 70, R = 10, T = 12, B = 24;

  // Prefix sums over n values in a 64-ary tree: a change writes one value per level (4 for 16 M
  // items), a prefix reads at most 63 values per level. Changes outnumber the prefixes a column
  // asks for (every allocation and free changes the stack; a column reads the offsets of the
  // bands above the lowest change), so this beats a Fenwick tree's log2(n) writes per change.
  class Sums {
    constructor(n) {
      this.n = n;
      this.v = new Float64Array(n);
      this.levels = [];
      let m = n;
      do { m = Math.ceil(m / 64); this.levels.push(new Float64Array(Math.max(1, m))); } while (m > 1);
    }
    build(vals) {
      this.v.set(vals);
      let below = this.v;
      for (const L of this.levels) {
        L.fill(0);
        for (let i = 0; i < below.length; i++) L[i >> 6] += below[i];
        below = L;
      }
    }
    add(i, d) {
      this.v[i] += d;
      const ls = this.levels;
      for (let l = 0, j = i; l < ls.length; l++) { j >>= 6; ls[l][j] += d; }
    }
    prefix(i) {  // Σ of values [0, i)
      let s = 0, j = i;
      const v = this.v;
      for (let k = j & ~63; k < j; k++) s += v[k];
      for (const L of this.levels) {
        j >>= 6;
        for (let k = j & ~63; k < j; k++) s += L[k];
      }
      return s;
    }
    // The first i whose prefix(i + 1) passes x (`strict`: > x, else >= x), n when none.
    find(x, strict) {
      const ls = this.levels;
      let idx = 0;
      for (let l = ls.length - 2; l >= -1; l--) {
        const L = l >= 0 ? ls[l] : this.v, end = Math.min(L.length, idx * 64 + 64);
        let k = idx * 64;
        for (; k < end; k++) {
          const w = L[k];
          if (strict ? w > x : w >= x) break;
          x -= w;
        }
        if (k === end) return this.n;
        idx = k;
      }
      return idx;
    }
  }

  // The band being drawn of each item drawn on its own (or of each grey band, keyed by the item
  // drawn on its own above it): where it started (column, x) and its top, bottom and fill. Kept in
  // slots for the items a draw meets, few beside n, found through one index over the items (4
  // bytes an item; a Map's lookups, a few a band each column, cost a fifth of a dense draw):
  // arrays of all of it over every item cost some 80 bytes an item to allocate and fill (400 MB
  // for 5 M allocations), which the page paid before drawing anything.
  class Bands {
    constructor(n) {
      this.slot = new Int32Array(n + 1);  // slot + 1, 0: none (n: the key above the last item)
      this.items = [];
      this.col = [];
      this.x = [];
      this.top = [];
      this.bot = [];
      this.fill = [];
    }
    clear() {
      for (const i of this.items) this.slot[i] = 0;
      this.items.length = this.col.length = this.x.length = this.top.length = this.bot.length = this.fill.length = 0;
    }
    colOf(i) {  // the column it was last drawn in, -2: none
      const q = this.slot[i];
      return q ? this.col[q - 1] : -2;
    }
    at(i) {  // its slot in the arrays (made on first use)
      let q = this.slot[i] - 1;
      if (q < 0) {
        q = this.col.length;
        this.slot[i] = q + 1;
        this.items.push(i);
        this.col.push(-2);
        this.x.push(0);
        this.top.push(0);
        this.bot.push(0);
        this.fill.push(0);
      }
      return q;
    }
  }

  // One chart into `parent`; returns {redraw}.
  FS.stackChart = function (parent, opt) {
    const src = opt.src, n = src.n, H = opt.height || 260;
    const box = el("div", { class: "stackbox" });
    const yz = FS.yZoom(() => draw());
    FS.zoomBar(box, yz);
    const c = el("canvas", { class: opt.cls || "stackchart", height: H, "data-space": opt.key });
    c.style.width = "100%";
    c.style.height = H + "px";
    c.style.border = "1px solid #ddd";
    box.appendChild(c);
    parent.appendChild(box);
    const ctx = c.getContext("2d");
    const bytesTree = new Sums(n), shownTree = new Sums(n);
    // Per item, kept from one draw to the next (a draw refills them): its bytes now, whether it is
    // drawn on its own, the list of those (next, previous), its band being drawn and the grey band
    // below it (the column it was last drawn in, where it started, its top, bottom and fill).
    const shown = new Uint8Array(n), cur = new Float64Array(n);
    const nxt = new Int32Array(n + 1), prv = new Int32Array(n + 1);
    const runB = new Bands(n), gapB = new Bands(n);
    let W = 900, cols = { length: 0, at: () => [] }, colEvent = null, x0 = 0, x1 = 1, y0 = 0, y1 = 1, drawnMatches = 0;
    const view = FS.view;
    const timeMode = () => view.time && src.timeOf;
    const xOfEvent = (e) => {  // canvas x of the start of event e's state
      const a = timeMode() ? src.timeOf(e) : e;
      return L + ((a - x0) / Math.max(1e-12, x1 - x0)) * (W - L - R);
    };
    const ys = (v) => H - B - ((v - y0) / Math.max(1, y1 - y0)) * (H - T - B);
    const colorCache = new Map();
    const color = (i) => {
      const k = src.colorKey(i);
      let v = colorCache.get(k);
      if (v === undefined) colorCache.set(k, v = src.color(i));
      return v;
    };
    // The integer events of column k: [E[k], E[k + 1]). The view's last event is the last
    // column's (a run that stopped at an OOM before the trace's first event changed everything there).
    function boundaries(pw) {
      const E = new Float64Array(pw + 1);
      for (let k = 0; k <= pw; k++) {
        const a = x0 + ((x1 - x0) * k) / pw;
        E[k] = Math.ceil(timeMode() ? src.eventAt(a) : a - 1e-9);
      }
      E[pw] = Math.max(E[pw], Math.floor(view.x1) + 1);
      return E;
    }
    function draw() {
      W = FS.widthOf(box);
      const dpr = window.devicePixelRatio || 1;
      c.width = Math.round(W * dpr);
      c.height = Math.round(H * dpr);
      ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      if (timeMode()) {
        x0 = src.timeOf(view.x0);
        x1 = Math.max(x0 + 1e-12, src.timeOf(view.x1));
      } else {
        x0 = view.x0;
        x1 = Math.max(view.x0 + 1, view.x1);
      }
      c.setAttribute("data-x0", String(Math.round(view.x0)));
      c.setAttribute("data-x1", String(Math.round(view.x1)));
      const pw = W - L - R, E = boundaries(pw), match = src.match();
      // Pass 1: each column's highest total and the event after which it stood.
      src.start(E[0], cur);
      let total = 0;
      for (let i = 0; i < n; i++) total += cur[i];
      const peak = new Float64Array(pw), at = new Float64Array(pw).fill(-1);
      let ch = src.changes(E[0]), next = ch.next();
      if (src.peaks) {  // the source's own loop (no per-item state: only the total moves)
        src.peaks(E, total, peak, at);
        next = null;
      }
      for (let k = 0; k < pw && next !== null; k++) {
        // The state carried in counts when nothing changes at the column's first event.
        let best = next && next[0] === E[k] ? -Infinity : total, bestAt = -1;
        const end = E[k + 1];
        while (next && next[0] < end) {
          const e = next[0];
          while (next && next[0] === e) {
            const i = next[1];
            total += next[2] - cur[i];
            cur[i] = next[2];
            next = ch.next();
          }
          if (total > best) { best = total; bestAt = e; }
        }
        peak[k] = best === -Infinity ? total : best;
        at[k] = bestAt;
      }
      let top = 1;
      for (let k = 0; k < pw; k++) top = Math.max(top, peak[k]);
      yz.fit(top * 1.05);
      y0 = yz.y0;
      y1 = yz.y1;
      // Pass 2: replay again, drawing each column's stack at its highest event.
      src.start(E[0], cur);
      // Items down to a quarter of a pixel are drawn on their own (at their exact height, which the
      // canvas blends), thinner ones merged.
      const bpp = (y1 - y0) / (H - T - B) / 4;
      const isShown = (i, b) => (b > 0 && (b >= bpp || (match && match[i] === 1)) ? 1 : 0);
      // The items drawn on their own, live now, as a list in their order (next/prev), beside the tree.
      nxt.fill(-1);
      prv.fill(-1);
      const HEAD = n;  // the list's head sentinel
      let tail = HEAD, shownCount = 0;
      for (let i = 0; i < n; i++) {
        shown[i] = isShown(i, cur[i]);
        if (shown[i]) { nxt[tail] = i; prv[i] = tail; tail = i; shownCount++; }
      }
      const link = (i) => {  // into the list after the shown item before it (the last, for a new allocation)
        let p = HEAD;
        if (tail !== HEAD && i > tail) {
          p = tail;
        } else {
          const r = shownTree.prefix(i);
          if (r > 0) p = kth(r);
        }
        const q = nxt[p];
        nxt[p] = i; prv[i] = p; nxt[i] = q;
        if (q >= 0) prv[q] = i; else tail = i;
      };
      const unlink = (i) => {
        const p = prv[i], q = nxt[i];
        nxt[p] = q;
        if (q >= 0) prv[q] = p; else tail = p;
        prv[i] = nxt[i] = -1;
      };
      bytesTree.build(cur);
      shownTree.build(shown);
      total = 0;
      for (let i = 0; i < n; i++) total += cur[i];
      ctx.fillStyle = "#fff";
      ctx.fillRect(0, 0, W, H);
      ctx.save();
      ctx.beginPath();
      ctx.rect(L, T, pw, H - T - B);
      ctx.clip();
      // Bands being drawn, merged across columns while an item keeps its place; grey bands of
      // thinner items, merged in the same way, keyed by the item drawn on its own above them (n:
      // above the last one).
      runB.clear();
      gapB.clear();
      // The fill and alpha set last: a dense view flushes some bands a column, every column, and
      // setting the canvas's state again to the same value costs as much as the fill itself.
      let fillNow = "#fff", alphaNow = 1;
      const fillStyle = (f) => {
        if (f !== fillNow) ctx.fillStyle = fillNow = f;
      };
      const alpha = (a) => {
        if (a !== alphaNow) ctx.globalAlpha = alphaNow = a;
      };
      const flushGap = (g, xEnd) => {
        fillStyle("#c8c8c8");
        const q = gapB.at(g);
        ctx.fillRect(gapB.x[q], gapB.top[q], Math.max(0.5, xEnd - gapB.x[q]), Math.max(0.5, gapB.bot[q] - gapB.top[q]));
      };
      const pinned = opt.pinned ? opt.pinned() : -1;
      const flush = (i, xEnd) => {
        const hit = match && match[i] === 1, dim = match && !hit;
        const q = runB.at(i), top = runB.top[q], x = runB.x[q], w = Math.max(0.5, xEnd - x);
        const h = hit || i === pinned ? Math.max(1.5, runB.bot[q] - top) : runB.bot[q] - top;  // a match stays visible
        alpha(dim ? 0.25 : 1);
        fillStyle(color(i));
        ctx.fillRect(x, top, w, h);
        if (src.fill && runB.fill[q] > 0) {  // the part in use, dark from the bottom
          const f = runB.fill[q];
          fillStyle("#1f5f9f");
          ctx.fillRect(x, top + h * (1 - f), w, h * f);
        }
        alpha(1);
        if (hit || i === pinned) {
          ctx.strokeStyle = i === pinned ? "#000" : "#d00";
          ctx.lineWidth = i === pinned ? 1.5 : 1;
          ctx.strokeRect(x, top, w, h);
        }
      };
      const apply = (e2) => {  // every change of event e2
        while (next && next[0] === e2) {
          const i = next[1], b = next[2], was = shown[i], d = b - cur[i];
          if (i < changed) changed = i;
          bytesTree.add(i, d);
          total += d;
          cur[i] = b;
          const now = b > 0 && (b >= bpp || (match !== null && match[i] === 1)) ? 1 : 0;
          if (now !== was) {
            shown[i] = now;
            shownTree.add(i, now - was);
            shownCount += now - was;
            if (now) link(i); else unlink(i);
          }
          next = ch.next();
        }
      };
      // What each column drew, for the hover: [bottom, top, item (-1: thinner ones merged)]...
      let buf = new Float64Array(1 << 16), used = 0;
      const colStart = new Int32Array(pw + 1);
      const push3 = (a, b2, id) => {
        if (used + 3 > buf.length) {
          const nb = new Float64Array(buf.length * 2);
          nb.set(buf);
          buf = nb;
        }
        buf[used++] = a;
        buf[used++] = b2;
        buf[used++] = id;
      };
      colEvent = new Float64Array(pw);
      drawnMatches = 0;
      ch = src.changes(E[0]);
      next = ch.next();
      const limit = 8 * (H - T - B);
      let lastEvent = E[0] - 1;
      // A column below the lowest item that changed since the last is the last column's: its
      // bands go on without walking the tree again (an allocation lands at the top of the stack).
      let changed = -1;
      // The bands and grey bands of the last column and of this one (item, or gap key, lists).
      let runs = [], nruns = 0, nextRuns = [];
      let gaps = [], ngaps = 0, nextGaps = [];
      for (let k = 0; k < pw; k++) {
        const x = L + k;
        if (at[k] >= 0) while (next && next[0] <= at[k]) apply(next[0]);
        const e = at[k] >= 0 ? at[k] : Math.max(lastEvent, E[k] - 1);
        lastEvent = e;
        colEvent[k] = e;
        colStart[k] = used;
        const ps = k > 0 ? colStart[k - 1] : 0, pe = used;  // the last column's entries
        let nr = 0, ng = 0, j = -1, cursor = y0, guard = 0, reused = 0;
        if (!src.fill && k > 0 && changed === Infinity) {  // nothing changed: the last column again
          for (let q = ps; q < pe; q += 3) push3(buf[q], buf[q + 1], buf[q + 2]);
          for (let q = 0; q < nruns; q++) { runB.col[runB.at(runs[q])] = k; nextRuns[nr++] = runs[q]; }
          for (let q = 0; q < ngaps; q++) { gapB.col[gapB.at(gaps[q])] = k; nextGaps[ng++] = gaps[q]; }
          guard = limit;
        } else if (!src.fill && k > 0 && changed > 0) {
          // The last column's entries below the lowest change: [gap below an item,] the item, ...
          let q = ps;
          while (q < pe) {
            let id = buf[q + 2], gap = false;
            if (id < 0) {
              if (q + 3 >= pe) break;
              gap = true;
              id = buf[q + 5];
            }
            if (id < 0 || id >= changed) break;
            if (gap) {
              gapB.col[gapB.at(id)] = k;
              nextGaps[ng++] = id;
              push3(buf[q], buf[q + 1], -1);
              q += 3;
            }
            runB.col[runB.at(id)] = k;
            nextRuns[nr++] = id;
            if (match && match[id] === 1) drawnMatches++;
            push3(buf[q], buf[q + 1], id);
            cursor = buf[q + 1];
            q += 3;
            reused = id + 1;
          }
        }
        if (guard < limit) {
          if (reused) {
            j = nxt[reused - 1];
          } else {  // from the item at the bottom of the view up
            const pos = bytesTree.find(y0, true), before = shownTree.prefix(Math.min(pos, n));
            j = before < shownCount ? kth(before + 1) : -1;
          }
        }
        // The items drawn on their own, in order, and the thinner ones between them as one grey
        // band each.
        while (cursor < y1 && guard++ < limit) {
          const off = j >= 0 ? bytesTree.prefix(j) : total;
          if (off > cursor) {
            const a = Math.max(cursor, y0), b2 = Math.min(off, y1);
            if (b2 > a) {
              const g = j >= 0 ? j : n, gt = ys(b2), gb = ys(a);
              const q = gapB.at(g);
              if (gapB.col[q] === k - 1 && Math.abs(gapB.top[q] - gt) < 0.01 && Math.abs(gapB.bot[q] - gb) < 0.01) {
                gapB.col[q] = k;
              } else {
                if (gapB.col[q] === k - 1) flushGap(g, x);
                gapB.col[q] = k;
                gapB.x[q] = x;
                gapB.top[q] = gt;
                gapB.bot[q] = gb;
              }
              nextGaps[ng++] = g;
              push3(a, b2, -1);
            }
          }
          if (j < 0 || off >= y1) break;
          const top2 = off + cur[j];
          const py0 = ys(Math.min(top2, y1)), py1 = ys(Math.max(off, y0));
          push3(off, top2, j);
          if (match && match[j] === 1) drawnMatches++;
          const f = src.fill ? src.fill(j, e) : 0;
          const q = runB.at(j);
          if (runB.col[q] === k - 1 && Math.abs(runB.top[q] - py0) < 0.01 && Math.abs(runB.bot[q] - py1) < 0.01 &&
              Math.abs(runB.fill[q] - f) < 0.005) {
            runB.col[q] = k;
          } else {
            if (runB.col[q] === k - 1) flush(j, x);
            runB.col[q] = k;
            runB.x[q] = x;
            runB.top[q] = py0;
            runB.bot[q] = py1;
            runB.fill[q] = f;
          }
          nextRuns[nr++] = j;
          cursor = top2;
          j = nxt[j];
        }
        for (let q = 0; q < nruns; q++) if (runB.colOf(runs[q]) === k - 1) { flush(runs[q], x); runB.col[runB.at(runs[q])] = -2; }
        for (let q = 0; q < ngaps; q++) if (gapB.colOf(gaps[q]) === k - 1) { flushGap(gaps[q], x); gapB.col[gapB.at(gaps[q])] = -2; }
        [runs, nextRuns] = [nextRuns, runs];
        [gaps, nextGaps] = [nextGaps, gaps];
        nruns = nr;
        ngaps = ng;
        changed = Infinity;
        while (next && next[0] < E[k + 1]) apply(next[0]);
      }
      colStart[pw] = used;
      for (let q = 0; q < nruns; q++) if (runB.colOf(runs[q]) === pw - 1) flush(runs[q], L + pw);
      for (let q = 0; q < ngaps; q++) if (gapB.colOf(gaps[q]) === pw - 1) flushGap(gaps[q], L + pw);
      const store = buf;
      cols = { length: pw, at: (k2) => store.subarray(colStart[k2], colStart[k2 + 1]) };
      // The trace's marks, the program's actions, OOMs and where the run stopped.
      (src.marks || []).forEach(([e, col, , dash]) => {
        const x = xOfEvent(e);
        if (x < L || x > W - R) return;
        ctx.strokeStyle = col;
        ctx.setLineDash(dash || []);
        ctx.beginPath();
        ctx.moveTo(x, T);
        ctx.lineTo(x, H - B);
        ctx.stroke();
      });
      ctx.setLineDash([]);
      if (src.stop !== undefined && src.stop < view.x1) {  // nothing replayed past it: its bands end there
        const x = Math.max(L, xOfEvent(src.stop + 1));
        ctx.fillStyle = "#fff";
        ctx.fillRect(x, T, W - R - x, H - T - B);
        ctx.fillStyle = "rgba(214,39,40,0.07)";
        ctx.fillRect(x, T, W - R - x, H - T - B);
      }
      ctx.restore();
      // Axes on round values.
      ctx.font = "10px sans-serif";
      ctx.fillStyle = "#555";
      ctx.strokeStyle = "#eee";
      ctx.textAlign = "right";
      FS.byteTicks(y0, y1, 4).forEach((v) => {
        if (v < y0 || v > y1) return;
        ctx.beginPath(); ctx.moveTo(L - 3, ys(v)); ctx.lineTo(L, ys(v)); ctx.stroke();
        ctx.fillText(FS.byteTick(v), L - 4, ys(v) + 4);
      });
      ctx.textAlign = "center";
      FS.ticks(x0, x1, Math.max(3, Math.floor(W / 150)), !timeMode()).forEach((v) => {
        const x = L + ((v - x0) / Math.max(1e-12, x1 - x0)) * (W - L - R);
        ctx.fillText(timeMode() ? FS.secondsTick(v) : (Math.round(v) || 0).toLocaleString(), x, H - 6);
      });
      c.setAttribute("data-matches-drawn", String(drawnMatches));
    }
    const kth = (k) => shownTree.find(k, false);  // the k-th item drawn on its own (1-based) in order
    // What is under the mouse: the column's event and the item (or the thin ones merged, -1).
    function hit(evt) {
      const rect = c.getBoundingClientRect();
      const px = ((evt.clientX - rect.left) / rect.width) * W, py = ((evt.clientY - rect.top) / rect.height) * H;
      const k = Math.floor(px - L);
      if (k < 0 || k >= cols.length) return null;
      const v = y0 + ((H - B - py) / (H - T - B)) * (y1 - y0);
      const items = cols.at(k);
      for (let q = 0; q < items.length; q += 3)
        if (v >= items[q] && v < items[q + 1]) return { col: k, event: colEvent[k], item: items[q + 2], v: v };
      return { col: k, event: colEvent[k], item: null, v: v };
    }
    c.addEventListener("mousemove", (evt) => {
      if (drag && evt.buttons) { dragTo(evt); return; }
      const hv = hit(evt);
      if (!hv) { FS.hideTip(); return; }
      FS.showTip(evt, src.lines(hv.item, hv.event));
    });
    c.addEventListener("mouseleave", () => { FS.hideTip(); drag = null; });
    c.addEventListener("click", (evt) => {
      if (moved) return;
      const hv = hit(evt);
      if (hv && hv.item !== null && hv.item >= 0) src.pin(hv.item, hv.event);
    });
    // Drag: zoom to the range (shift: pan); wheel: zoom time around the cursor (shift: bytes).
    let drag = null, moved = false;
    const xAt = (evt) => {
      const rect = c.getBoundingClientRect();
      const px = ((evt.clientX - rect.left) / rect.width) * W;
      const a = x0 + ((px - L) / (W - L - R)) * (x1 - x0);
      return timeMode() ? src.eventAt(a) : a;
    };
    const yAt = (evt) => {
      const rect = c.getBoundingClientRect();
      return y0 + ((H - B - ((evt.clientY - rect.top) / rect.height) * H) / (H - T - B)) * (y1 - y0);
    };
    c.addEventListener("mousedown", (evt) => {
      drag = { from: xAt(evt), px: evt.clientX, shift: evt.shiftKey, v0: view.x0, v1: view.x1, y: yAt(evt) };
      moved = false;
    });
    function dragTo(evt) {
      if (Math.abs(evt.clientX - drag.px) > 3) moved = true;
      if (drag.shift && moved) {
        const rect = c.getBoundingClientRect();
        const d = ((drag.px - evt.clientX) / rect.width) * (W / (W - L - R)) * (drag.v1 - drag.v0);
        FS.setX(drag.v0 + d, drag.v1 + d);
      }
    }
    c.addEventListener("mouseup", (evt) => {
      if (drag && !drag.shift && moved) {
        const x = xAt(evt);
        FS.setX(Math.min(drag.from, x), Math.max(drag.from, x));
      }
      drag = null;
    });
    c.addEventListener("dblclick", () => { yz.auto = true; FS.setX(view.lo, view.hi); });
    c.addEventListener("wheel", (evt) => {
      evt.preventDefault();
      const k = (evt.deltaY || evt.deltaX) > 0 ? 1.25 : 0.8;
      if (evt.shiftKey || evt.altKey) { yz.zoom(k, yAt(evt)); return; }
      const x = xAt(evt);
      FS.setX(x - (x - view.x0) * k, x + (view.x1 - x) * k);
    }, { passive: false });
    FS.redraws.push(draw);
    draw();
    return { canvas: c, redraw: draw, hit: hit, columns: () => cols, columnEvents: () => colEvent, yPixel: ys };
  };
})();
