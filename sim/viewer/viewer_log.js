// Every allocation of a run and every region it held (issue 51), as the charts, the scrubber and
// the entries panel read them: fragsim wrote each (device, space)'s allocations as two varint
// streams (history.allocations: sim/engine/allocation_log.h says the layout) and its regions over
// time (history.regions: sim/engine/region_log.h); this file decodes them into typed arrays once,
// and holds what every view shares about them — the search (by name, frame, shape or size range,
// highlighted in every chart and map) and the pinned panel of a mark's entries.
"use strict";
(function () {
  const FS = window.FS, data = FS.data, el = FS.el, bytes = FS.bytes;

  // The browser's own base64 decoder where it has one (Chromium 140 on): atob and a loop over its
  // characters took 0.5 s of the 1 GB snapshot's page. The inflate below stays in script, and
  // synchronous: the browser's DecompressionStream spent no less of the page's thread, and its
  // hundreds of awaited chunks each wait for the thread again, which on a loaded machine took the
  // 10 M-event JAX page from 7 s to 12 s.
  const fromBase64 = Uint8Array.fromBase64 ? (s) => Uint8Array.fromBase64(s) : (s) => {
    const bin = atob(s), u = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) u[i] = bin.charCodeAt(i);
    return u;
  };
  // zlib's format (RFC 1950: a 2-byte header, deflate blocks, a checksum left unchecked), inflated
  // into `size` bytes (RFC 1951: stored, fixed and dynamic Huffman blocks).
  const LBASE = [3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258];
  const LEXT = [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0];
  const DBASE = [1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073,
    4097, 6145, 8193, 12289, 16385, 24577];
  const DEXT = [0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13];
  const ORDER = [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15];
  // A canonical Huffman code as a table indexed by the next `max` bits (as the stream packs them):
  // each entry (symbol << 4) | its length.
  function huffman(lengths, n) {
    let max = 1;
    for (let i = 0; i < n; i++) if (lengths[i] > max) max = lengths[i];
    const count = new Int32Array(16), next = new Int32Array(16);
    for (let i = 0; i < n; i++) count[lengths[i]]++;
    count[0] = 0;
    for (let b = 1, code = 0; b < 16; b++) { code = (code + count[b - 1]) << 1; next[b] = code; }
    const t = new Int32Array(1 << max);
    for (let s = 0; s < n; s++) {
      const len = lengths[s];
      if (!len) continue;
      let c = next[len]++, r = 0;
      for (let k = 0; k < len; k++) { r = (r << 1) | (c & 1); c >>= 1; }
      for (let k = r; k < 1 << max; k += 1 << len) t[k] = (s << 4) | len;
    }
    return { t: t, max: max };
  }
  const FIXED = (() => {
    const l = new Uint8Array(288);
    l.fill(8, 0, 144); l.fill(9, 144, 256); l.fill(7, 256, 280); l.fill(8, 280, 288);
    return [huffman(l, 288), huffman(new Uint8Array(30).fill(5), 30)];
  })();
  function inflate(src, size) {
    const out = new Uint8Array(size), n = src.length;
    let p = 2, bb = 0, bc = 0, o = 0;
    // (the hot loops keep the bit buffer in locals: closures over it cost a third of the time)
    const take = (k) => {
      while (bc < k) { bb |= (p < n ? src[p] : 0) << bc; p++; bc += 8; }
      const v = bb & ((1 << k) - 1);
      bb >>>= k;
      bc -= k;
      return v;
    };
    const sym = (h) => {
      while (bc < h.max) { bb |= (p < n ? src[p] : 0) << bc; p++; bc += 8; }
      const e = h.t[bb & ((1 << h.max) - 1)], len = e & 15;
      if (!len) throw new Error("allocation log: a bad deflate code");
      bb >>>= len;
      bc -= len;
      return e >> 4;
    };
    for (let last = 0; !last;) {
      last = take(1);
      const type = take(2);
      if (type === 0) {  // stored: whole bytes from the next boundary
        p -= bc >> 3;
        bb = bc = 0;
        const len = src[p] | (src[p + 1] << 8);
        p += 4;
        out.set(src.subarray(p, p + len), o);
        p += len;
        o += len;
        continue;
      }
      let lit, dist;
      if (type === 1) {
        [lit, dist] = FIXED;
      } else {
        const hlit = take(5) + 257, hdist = take(5) + 1, hclen = take(4) + 4;
        const cl = new Uint8Array(19);
        for (let i = 0; i < hclen; i++) cl[ORDER[i]] = take(3);
        const ch = huffman(cl, 19), lens = new Uint8Array(hlit + hdist);
        for (let i = 0; i < hlit + hdist;) {
          const s2 = sym(ch);
          if (s2 < 16) { lens[i++] = s2; continue; }
          const [rep, val] = s2 === 16 ? [3 + take(2), lens[i - 1]] : s2 === 17 ? [3 + take(3), 0] : [11 + take(7), 0];
          for (let k = 0; k < rep; k++) lens[i++] = val;
        }
        lit = huffman(lens.subarray(0, hlit), hlit);
        dist = huffman(lens.subarray(hlit), hdist);
      }
      const lt = lit.t, lmax = lit.max, lmask = (1 << lmax) - 1, dt = dist.t, dmax = dist.max, dmask = (1 << dmax) - 1;
      for (;;) {
        while (bc < lmax) { bb |= (p < n ? src[p] : 0) << bc; p++; bc += 8; }
        const e = lt[bb & lmask], len0 = e & 15, s2 = e >> 4;
        if (!len0) throw new Error("allocation log: a bad deflate code");
        bb >>>= len0;
        bc -= len0;
        if (s2 < 256) { out[o++] = s2; continue; }
        if (s2 === 256) break;
        let len = LBASE[s2 - 257];
        const lx = LEXT[s2 - 257];
        if (lx) {
          while (bc < lx) { bb |= (p < n ? src[p] : 0) << bc; p++; bc += 8; }
          len += bb & ((1 << lx) - 1);
          bb >>>= lx;
          bc -= lx;
        }
        while (bc < dmax) { bb |= (p < n ? src[p] : 0) << bc; p++; bc += 8; }
        const de = dt[bb & dmask], dl = de & 15, ds = de >> 4;
        if (!dl) throw new Error("allocation log: a bad deflate distance");
        bb >>>= dl;
        bc -= dl;
        let d = DBASE[ds];
        const dx = DEXT[ds];
        if (dx) {
          while (bc < dx) { bb |= (p < n ? src[p] : 0) << bc; p++; bc += 8; }
          d += bb & ((1 << dx) - 1);
          bb >>>= dx;
          bc -= dx;
        }
        if (len > 32 && d >= len) { out.copyWithin(o, o - d, o - d + len); o += len; }
        else for (let k = 0; k < len; k++, o++) out[o] = out[o - d];
      }
    }
    if (o !== size) throw new Error("allocation log: " + o + " bytes inflated, " + size + " expected");
    return out;
  }
  // The column order of sim/engine/allocation_log.h, and those in the blob drawing reads (`data`;
  // the rest are in `more`, inflated the first time something asks).
  const C = { flags: 0, event: 1, time: 2, id: 3, requested: 4, pad: 5, addr: 6, recorded: 7, stack: 8, name: 9, shape: 10,
    stream: 11, back: 12, fevent: 13, ftime: 14, fstream: 15 };
  const DRAWN = [C.flags, C.event, C.requested, C.pad, C.stack, C.name, C.back, C.fevent];
  const CHECK = 64;  // records between checkpoints of the columns read for one entry
  // A varint at u[q], as [value, next q] through the two-element array r (no allocation).
  function varint(u, q, r) {
    let v = 0, m = 1, b;
    do { b = u[q++]; v += (b & 127) * m; m *= 128; } while (b & 128);
    r[0] = v;
    r[1] = q;
  }
  const unzig = (v) => (v % 2 ? -(v + 1) / 2 : v / 2);
  // One slot's allocations, in allocation order (the ordinal): what drawing needs as arrays
  // (events, blocks, colour keys, frees); the times, ids, addresses and free times as arrays the
  // first time something asks for them; the rest read again from the columns for one entry
  // (entry()), from a checkpoint every CHECK records.
  function decodeSlot(h, js) {
    const n = js.count, lens = js.columns;
    // Where each column starts in its blob.
    const start = new Array(lens.length);
    let inData = 0, inMore = 0;
    lens.forEach((l, c) => {
      if (DRAWN.includes(c)) { start[c] = inData; inData += l; } else { start[c] = inMore; inMore += l; }
    });
    const u = inflate(fromBase64(js.data), inData);
    const aEv = new Float64Array(n), fEv = new Float64Array(n).fill(Infinity), block = new Float64Array(n);
    const key = new Int32Array(n);
    const checks = new Uint32Array(Math.ceil(n / CHECK) * 7);  // per checkpoint: cursors for one entry's read
    const r = [0, 0];
    let qf = start[C.flags], qe = start[C.event], qr = start[C.requested], qp = start[C.pad], qs = start[C.stack];
    let qn = start[C.name], ev = 0;
    for (let i = 0; i < n; i++) {
      if (i % CHECK === 0) {
        const k = (i / CHECK) * 7;
        checks[k + 3] = qr; checks[k + 4] = qp; checks[k + 5] = qs; checks[k + 6] = qn;
      }
      const flags = u[qf++];
      let b = u[qe];  // one-byte varints, the common case, without a call
      if (b < 128) { ev += b; qe++; } else { varint(u, qe, r); ev += r[0]; qe = r[1]; }
      aEv[i] = ev;
      b = u[qr];
      let req;
      if (b < 128) { req = b; qr++; } else { varint(u, qr, r); req = r[0]; qr = r[1]; }
      b = u[qp];
      if (b < 128) { block[i] = req + unzig(b); qp++; } else { varint(u, qp, r); block[i] = req + unzig(r[0]); qp = r[1]; }
      let stack = 0, name = -1;
      if (flags & 16) { varint(u, qs, r); stack = r[0]; qs = r[1]; }
      if (flags & 32) { varint(u, qn, r); name = r[0]; qn = r[1]; }
      key[i] = name >= 0 ? name : stack ? -1 - stack : -2147483648;
    }
    // Frees, in free order: the ordinal counted back from the allocations made before the free.
    const order = new Uint32Array(n);
    let nf = 0, made = 0, fe = 0;
    const endBack = start[C.back] + lens[C.back];
    let qb = start[C.back], qfe = start[C.fevent];
    while (qb < endBack) {
      varint(u, qb, r);
      const back = r[0];
      qb = r[1];
      varint(u, qfe, r);
      fe += r[0];
      qfe = r[1];
      while (made < n && aEv[made] < fe) made++;
      const i = made - 1 - back;
      fEv[i] = fe;
      order[nf++] = i;
    }
    const slot = { h: h, slot: js.slot, n: n, u: u, start: start, checks: checks, aEv: aEv, fEv: fEv, block: block,
      key: key, freeOrder: order.subarray(0, nf) };
    // The other blob, once: with the cursors of its per-entry columns at each checkpoint.
    let u2 = null;
    const more = () => {
      if (u2) return u2;
      u2 = inflate(fromBase64(js.more), inMore);
      let qc = start[C.recorded], qh = start[C.shape], qm = start[C.stream];
      for (let i = 0, f = start[C.flags]; i < n; i++, f++) {
        if (i % CHECK === 0) { const k = (i / CHECK) * 7; checks[k] = qc; checks[k + 1] = qh; checks[k + 2] = qm; }
        const flags = u[f];
        if (flags & 2) { varint(u2, qc, r); qc = r[1]; }
        if (flags & 64) { varint(u2, qh, r); qh = r[1]; }
        if (flags & 128) { varint(u2, qm, r); qm = r[1]; }
      }
      return u2;
    };
    slot.more = more;
    // Times, ids, addresses, free times and free streams: decoded whole, once, when first read.
    const lazy = (name, fill) => {
      let v = null;
      Object.defineProperty(slot, name, { get: () => v || (v = fill(more())) });
    };
    lazy("aT", (w) => {
      const a = new Float64Array(n);
      let q = start[C.time], t = 0;
      for (let i = 0; i < n; i++) {
        varint(w, q, r);
        q = r[1];
        t += (i ? aEv[i] - aEv[i - 1] : aEv[0]) + unzig(r[0]);
        a[i] = t;
      }
      return a;
    });
    lazy("id", (w) => {
      const a = new Float64Array(n);
      let q = start[C.id], v = 0;
      for (let i = 0; i < n; i++) { varint(w, q, r); q = r[1]; a[i] = v += 1 + unzig(r[0]); }
      return a;
    });
    lazy("addr", (w) => {
      const a = new Float64Array(n);
      let q = start[C.addr], ad = 0;
      for (let i = 0, f = start[C.flags]; i < n; i++, f++) {
        if (u[f] & 1) { varint(w, q, r); q = r[1]; a[i] = ad += unzig(r[0]); } else a[i] = NaN;
      }
      return a;
    });
    lazy("fT", (w) => {
      const a = new Float64Array(n).fill(NaN);
      let q = start[C.ftime], t = 0, prev = 0;
      for (let k = 0; k < nf; k++) {
        const i = slot.freeOrder[k];
        varint(w, q, r);
        q = r[1];
        t += fEv[i] - prev + unzig(r[0]);
        prev = fEv[i];
        a[i] = t;
      }
      return a;
    });
    lazy("freeStream", (w) => {  // ordinal → its free's stream change, where there is one
      const m = new Map();
      let q = start[C.fstream];
      for (let k = 0; k < nf; k++) {
        varint(w, q, r);
        q = r[1];
        if (r[0]) m.set(slot.freeOrder[k], unzig(r[0]));
      }
      return m;
    });
    return slot;
  }
  // What the arrays leave out of allocation i, read from its checkpoint on (each entry read on
  // the way is handed to `each`, when given).
  function entry(s, i, each) {
    const u = s.u, u2 = s.more(), k0 = Math.floor(i / CHECK), c7 = k0 * 7, r = [0, 0];
    const addr = s.addr;
    let qc = s.checks[c7], qh = s.checks[c7 + 1], qm = s.checks[c7 + 2], qr = s.checks[c7 + 3], qp = s.checks[c7 + 4];
    let qs = s.checks[c7 + 5], qn = s.checks[c7 + 6], e = null;
    for (let j = k0 * CHECK; j <= i; j++) {
      const flags = u[s.start[C.flags] + j];
      varint(u, qr, r); qr = r[1];
      const requested = r[0];
      varint(u, qp, r); qp = r[1];
      let recorded = NaN;
      if (flags & 2) { varint(u2, qc, r); qc = r[1]; recorded = (flags & 1 ? addr[j] : 0) + unzig(r[0]); }
      else if (flags & 8) recorded = addr[j];
      let stack = 0, name = -1, shape = -1, stream = 0;
      if (flags & 16) { varint(u, qs, r); qs = r[1]; stack = r[0]; }
      if (flags & 32) { varint(u, qn, r); qn = r[1]; name = r[0]; }
      if (flags & 64) { varint(u2, qh, r); qh = r[1]; shape = r[0]; }
      if (flags & 128) { varint(u2, qm, r); qm = r[1]; stream = unzig(r[0]); }
      if (j === i || each) {
        e = { requested: requested, recorded: recorded, recordedKnown: (flags & 10) !== 0, preTrace: (flags & 4) !== 0,
          stack: stack, name: name, shape: shape, stream: stream };
        if (each) each(full(s, j, e));
      }
    }
    return full(s, i, e);
  }
  // Every entry of a slot in order, read once (the search's pass): fn(entry).
  function forEachEntry(s, fn) {
    for (let k = 0; k * CHECK < s.n; k++) {
      const last = Math.min(s.n, (k + 1) * CHECK) - 1;
      entry(s, last, fn);
    }
  }
  function full(s, i, e) {
    const al = s.h.allocations;
    return { ordinal: i, id: s.id[i], requested: e.requested, block: s.block[i], addr: s.addr[i], recorded: e.recorded,
      recordedKnown: e.recordedKnown, preTrace: e.preTrace, stack: e.stack, name: e.name >= 0 ? al.names[e.name] : "",
      shape: e.shape >= 0 ? al.shapes[e.shape] : "", stream: e.stream,
      freeStream: s.freeStream.has(i) ? e.stream + s.freeStream.get(i) : e.stream,
      allocEvent: s.aEv[i], allocT: s.aT[i], freeEvent: s.fEv[i], freeT: s.fT[i] };
  }
  // The log of a run: per history slot, its allocations (null when the run kept none).
  const logs = new Map();
  function logOf(r) {
    if (logs.has(r)) return logs.get(r);
    const h = r.history;
    let v = null;
    if (h && h.allocations) {
      v = [];
      h.allocations.slots.forEach((js) => { v[js.slot] = decodeSlot(h, js); });
    }
    logs.set(r, v);
    return v;
  }
  // A region of history.regions as an object.
  function regionsOf(r) {
    const h = r.history;
    if (!h || !h.regions) return [];
    if (h._regions) return h._regions;
    h._regions = h.regions.map((g, i) => ({ index: i, slot: g[0], id: g[1], base: g[2], size: g[3], obtained: g[4],
      obtainedT: g[5], released: g[6] < 0 ? Infinity : g[6], releasedT: g[7], cause: g[8], preTrace: g[9] === 1,
      usage: g[10] }));
    return h._regions;
  }
  // A region's usage after event e: [mapped, in use] at its last point at or before e.
  function usageAt(g, e) {
    const u = g.usage, k = usagePoint(g, e, -1);
    return k < 0 ? [g.size, 0] : [u[3 * k + 1], u[3 * k + 2]];
  }
  // The index of a region's last usage point at or before e (-1: none): walked forward from
  // point `from` when that one is at or before e (a chart's columns go forward in events), else
  // by bisection.
  function usagePoint(g, e, from) {
    const u = g.usage, m = u.length / 3;
    let k = from;
    if (k >= 0 && k < m && u[3 * k] <= e) {
      while (k + 1 < m && u[3 * k + 3] <= e) k++;
      return k;
    }
    let lo = 0, hi = m;
    while (lo < hi) { const mid = (lo + hi) >> 1; if (u[3 * mid] <= e) lo = mid + 1; else hi = mid; }
    return lo - 1;
  }
  const hex = (a) => (isNaN(a) ? "?" : "0x" + a.toString(16));
  const stopText = (r, slot) => {
    const h = r.history, at = h ? FS.slotStop(h, slot) : undefined;
    return at === undefined ? "still live when the run ended"
      : at !== h.stopped_at ? "still live when its process stopped at event " + at + " (its first OOM)"
      : "still live when the run stopped at event " + at + " (its first OOM)";
  };
  // Time from the first event, "" when the trace records no times.
  const inT = (h, ticks) => (h.timed === false || isNaN(ticks) ? "" : ", " + FS.secondsText(ticks * h.seconds_per_tick) + " in");
  // An allocation's entries, as the panel and the hover show them.
  function entryLines(r, s, i) {
    const h = r.history, e = entry(s, i), slot = h.slots[s.slot];
    const lines = ["buffer: " + (e.name || "id " + e.id) + (e.shape ? "  " + e.shape : "") + "  (device " + slot[0] + " " +
      slot[1] + (e.preTrace ? "; live before the recording began" : "") + ")",
      "alloc: event " + e.allocEvent + inT(h, e.allocT) + ", stream " + e.stream + ", id " + e.id,
      isFinite(e.freeEvent) ? "free:  event " + e.freeEvent + inT(h, e.freeT) + ", stream " + e.freeStream
                            : "free:  none, " + stopText(r, s.slot),
      "requested " + bytes(e.requested) + ", block " + bytes(e.block) +
        (e.block > e.requested ? " (padding/rounding " + bytes(e.block - e.requested) + ")" : "")];
    if (isFinite(e.freeEvent))
      lines.push("lifetime: " + (e.freeEvent - e.allocEvent) + " events" +
        (h.timed === false ? "" : ", " + FS.secondsText((e.freeT - e.allocT) * h.seconds_per_tick)));
    if (!isNaN(e.addr)) {
      const g = regionsOf(r).find((x) => x.slot === s.slot && x.base <= e.addr && e.addr < x.base + x.size &&
        x.obtained <= e.allocEvent && e.allocEvent <= x.released);
      lines.push("address " + hex(e.addr) + (g ? " in region " + g.id + " at " + hex(g.base) + " (offset " +
        bytes(e.addr - g.base) + ")" : ""));
    }
    if (e.recordedKnown)
      lines.push(e.recorded === e.addr ? "the recording placed it at the same address"
                                       : "the recording had placed it at " + hex(e.recorded));
    const frames = data.stacks[e.stack] || [];
    if (frames.length) {
      lines.push("stack (innermost first):");
      frames.forEach((f) => lines.push("  " + f));
    } else if (e.name) {
      lines.push("no stack recorded; its name (the operator, for a profiler trace): " + e.name);
    }
    return lines;
  }
  function regionLines(r, g, e) {
    const h = r.history, slot = h.slots[g.slot];
    const [mapped, inUse] = usageAt(g, e === undefined ? g.obtained : e);
    let peak = 0;
    for (let k = 2; k < g.usage.length; k += 3) peak = Math.max(peak, g.usage[k]);
    const cause = { empty_cache: "empty_cache", alloc: "an allocation (the allocator gave cached memory back to " +
      "retry after the device refused, or to stay under its limit)", free: "a free (a trim: the pool kept less)" };
    return ["region " + g.id + " at " + hex(g.base) + ", " + bytes(g.size) + " (device " + slot[0] + " " + slot[1] + ")",
      "obtained at event " + g.obtained + inT(h, g.obtainedT) + (g.preTrace ? " (held before the recording began)" : ""),
      isFinite(g.released) ? "released at event " + g.released + inT(h, g.releasedT) + " by " + (cause[g.cause] || g.cause)
                           : "held " + stopText(r, g.slot).replace("still live ", ""),
      (e === undefined ? "" : "after event " + e + ": ") + bytes(inUse) + " in use of " + bytes(mapped) + " mapped" +
        (mapped < g.size ? " (" + bytes(g.size - mapped) + " reserved but unmapped)" : ""),
      "most in use at once: " + bytes(peak)];
  }

  // ---- the pinned panel: what was clicked, in full ----
  const panel = el("div", { id: "pinned", class: "pinned-panel" });
  panel.appendChild(el("div", { class: "pinned-title" }, "Entries"));
  const panelText = el("pre", { class: "pinned" });
  panel.appendChild(panelText);
  const close = el("button", { class: "unpin" }, "unpin");
  close.addEventListener("click", () => pin(null));
  panel.appendChild(close);
  panel.style.display = "none";
  document.body.appendChild(panel);
  let pinned = null;  // {run, slot, ordinal} or {run, region}
  function pin(what) {
    pinned = what;
    if (!what) {
      panel.style.display = "none";
    } else {
      panelText.textContent = what.lines.join("\n");
      panel.style.display = "block";
    }
    FS.redraws.forEach((f) => f());
  }
  FS.pinned = () => pinned;
  FS.pinAllocation = (r, s, i) => pin({ run: r, slot: s.slot, ordinal: i, lines: entryLines(r, s, i) });
  FS.pinRegion = (r, g, e) => pin({ run: r, region: g.index, lines: regionLines(r, g, e) });
  // A buffer of an address map (an allocation the log holds at that event and address).
  FS.pinBuffer = (buf) => {
    for (const r of data.runs) {
      const log = logOf(r);
      if (!log) continue;
      for (const s of log) {
        if (!s) continue;
        const ad = s.addr;
        for (let i = 0; i < s.n; i++)
          if (s.aEv[i] === buf.event_index && "0x" + ad[i].toString(16) === buf.addr) return FS.pinAllocation(r, s, i);
      }
    }
  };

  // ---- search: by name, frame, shape or size range; matches highlighted in every chart ----
  // A query is words, all of which must hold: a size range ("1MiB-2GiB", ">100MiB", "<=4KiB",
  // "64MiB") on the requested size, else text found in the name, the shape or a frame of the stack.
  const UNIT = { b: 1, kib: 1024, mib: 1024 ** 2, gib: 1024 ** 3, tib: 1024 ** 4, kb: 1e3, mb: 1e6, gb: 1e9, tb: 1e12 };
  function size(s) {
    const m = /^([0-9]*\.?[0-9]+)\s*([a-z]*)$/i.exec(s);
    if (!m) return null;
    const u = m[2] ? UNIT[m[2].toLowerCase()] : 1;
    return u === undefined ? null : Number(m[1]) * u;
  }
  function parse(q) {
    const tests = [];
    q.trim().split(/\s+/).filter((w) => w).forEach((w) => {
      let m;
      if ((m = /^(<=|>=|<|>)(.+)$/.exec(w)) && size(m[2]) !== null) {
        const v = size(m[2]), op = m[1];
        tests.push((e) => (op === "<" ? e.requested < v : op === "<=" ? e.requested <= v : op === ">" ? e.requested > v
                                                                                                        : e.requested >= v));
      } else if ((m = /^(.+?)(?:-|\.\.)(.+)$/.exec(w)) && size(m[1]) !== null && size(m[2]) !== null) {
        const a = size(m[1]), b = size(m[2]);
        tests.push((e) => e.requested >= a && e.requested <= b);
      } else if (/^[0-9.]+[a-z]+$/i.test(w) && size(w) !== null) {
        const v = size(w);
        tests.push((e) => e.requested === v);
      } else {
        const t = w.toLowerCase(), stackHit = new Map();
        tests.push((e) => {
          if (e.name.toLowerCase().includes(t) || e.shape.toLowerCase().includes(t)) return true;
          if (!e.stack) return false;
          if (!stackHit.has(e.stack))
            stackHit.set(e.stack, (data.stacks[e.stack] || []).some((f) => f.toLowerCase().includes(t)));
          return stackHit.get(e.stack);
        });
      }
    });
    return tests;
  }
  // The search now: per run and slot a Uint8Array of matches, and each map's hit test.
  const search = { active: false, query: "", count: 0, matches: new Map() };
  search.of = (r, slot) => (search.active && search.matches.get(r) ? search.matches.get(r)[slot] : null);
  // Whether an address map's buffer ({event_index, addr}) is a match.
  search.has = (buf) => {
    for (const [r, per] of search.matches) {
      const log = logOf(r);
      for (let k = 0; k < per.length; k++) {
        const s = log[k], m = per[k];
        if (!s || !m) continue;
        let lo = 0, hi = s.n;  // allocations by event: a binary search for the buffer's alloc event
        while (lo < hi) { const mid = (lo + hi) >> 1; if (s.aEv[mid] < buf.event_index) lo = mid + 1; else hi = mid; }
        if (lo < s.n && s.aEv[lo] === buf.event_index) return m[lo] === 1;
      }
    }
    return false;
  };
  FS.search = search;
  function run(q) {
    search.query = q;
    search.matches = new Map();
    search.count = 0;
    const tests = parse(q);
    search.active = tests.length > 0;
    const found = [];
    if (search.active)
      data.runs.forEach((r) => {
        const log = logOf(r);
        if (!log) return;
        const per = [];
        log.forEach((s, k) => {
          if (!s) return;
          const m = new Uint8Array(s.n);
          forEachEntry(s, (e) => {
            if (tests.every((t) => t(e))) {
              m[e.ordinal] = 1;
              search.count++;
              if (found.length < 50) found.push([r, s, e.ordinal, e]);
            }
          });
          per[k] = m;
        });
        search.matches.set(r, per);
      });
    status.textContent = !search.active ? "" : search.count + " allocation" + (search.count === 1 ? "" : "s") +
      " match" + (search.count === 1 ? "es" : "") + (search.count ? " (highlighted in every chart and map; the first " +
      Math.min(50, search.count) + " below, click one for its entries)" : "");
    while (list.firstChild) list.removeChild(list.firstChild);
    found.forEach(([r, s, i, e]) => {
      const li = el("li", { class: "match" }, (data.runs.length > 1 ? FS.runName(r) + ": " : "") + (e.name || "id " + e.id) +
        " " + bytes(e.requested) + ", device " + r.history.slots[s.slot][0] + ", events " + e.allocEvent + "–" +
        (isFinite(e.freeEvent) ? e.freeEvent : "end"));
      li.addEventListener("click", () => FS.pinAllocation(r, s, i));
      list.appendChild(li);
    });
    FS.redraws.forEach((f) => f());
    (FS.onSearch || []).forEach((f) => f());
  }
  FS.runSearch = run;
  const any = data.runs.some((r) => r.history && r.history.allocations);  // (decoded when first read)
  const box = document.getElementById("search");
  const input = el("input", { type: "search", id: "search-box", size: 50,
    placeholder: "name, frame or shape text; size: 64MiB, >1GiB, 1MiB-2GiB" });
  const status = el("span", { class: "note search-status" });
  const list = el("ul", { class: "lines matches" });
  if (any && box) {
    box.appendChild(el("h2", {}, "Search"));
    const bar = el("div", { class: "controls" });
    bar.appendChild(el("label", { for: "search-box" }, "Find allocations: "));
    bar.appendChild(input);
    bar.appendChild(el("span", {}, " "));
    bar.appendChild(status);
    box.appendChild(bar);
    box.appendChild(list);
    let timer = null;
    input.addEventListener("input", () => {
      clearTimeout(timer);
      timer = setTimeout(() => run(input.value), 250);
    });
    input.addEventListener("keydown", (evt) => { if (evt.key === "Enter") { clearTimeout(timer); run(input.value); } });
  }
  FS.logOf = logOf;
  FS.regionsOf = regionsOf;
  FS.usageAt = usageAt;
  FS.usagePoint = usagePoint;
  FS.entry = entry;
  FS.entryLines = entryLines;
  FS.regionLines = regionLines;
})();
