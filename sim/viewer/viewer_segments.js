// Segments over time (issue 51): per run and device and space, every region the policy held — a
// PyTorch segment or an expandable segment's reservation, a BFC region, a cuda-async pool chunk, a
// static heap — as a band from when it was obtained to when it was released, as tall as the bytes
// mapped in it then, stacked in the order they were obtained (so the top is the reserved memory),
// with the bytes in use in it drawn dark from its bottom. fragsim followed the regions
// (history.regions: sim/engine/region_log.h); the level of detail is the stack chart's. Hover a
// band: when it was obtained and released and by what (empty_cache, an allocation's retry, a
// trim); click pins it.
"use strict";
(function () {
  const FS = window.FS, data = FS.data, el = FS.el;
  const runs = data.runs.filter((r) => FS.regionsOf(r).length);
  const box = document.getElementById("segments");
  if (!runs.length || !box) return;
  box.appendChild(el("h2", {}, "Segments over time"));
  function chart(r, slot, regions) {
    const h = r.history, dev = { device: h.slots[slot][0], space: h.slots[slot][1] };
    const wrap = el("div", { class: "segbox" });
    const released = regions.filter((g) => isFinite(g.released)).length;
    wrap.appendChild(el("h3", {}, (data.runs.length > 1 ? FS.runName(r) + " — " : "") + FS.where(dev) + ": " +
      regions.length + " region" + (regions.length === 1 ? "" : "s") + " held, " + released + " released" +
      (h.regions_cut_at >= 0 ? " — followed up to event " + h.regions_cut_at + " (a bound of the page)" : "")));
    box.appendChild(wrap);
    const room = el("div", { class: "segroom" });  // the chart's height until it is drawn
    room.style.height = "230px";
    wrap.appendChild(room);
    FS.whenShown(wrap, () => {
      wrap.removeChild(room);
      draw(r, slot, regions, wrap, dev);
    });
  }
  function draw(r, slot, regions, wrap, dev) {
    const h = r.history;
    // Changes in event order: obtained (its mapped bytes), each change of what is mapped, released.
    const changes = [];
    regions.forEach((g, i) => {
      for (let k = 0; k < g.usage.length; k += 3) changes.push([g.usage[k], i, g.usage[k + 1]]);
      if (!g.usage.length) changes.push([g.obtained, i, g.size]);
      if (isFinite(g.released)) changes.push([g.released, i, 0]);
    });
    changes.sort((a, b) => a[0] - b[0] || (a[2] === 0) - (b[2] === 0));
    const log = FS.logOf(r), s = log && log[slot];
    const point = new Int32Array(regions.length).fill(-1);  // per region: the usage point fill() read last
    const cl = s ? FS.clock(r, s) : null;
    const src = {
      n: regions.length,
      start: (E, cur) => {
        cur.fill(0);
        regions.forEach((g, i) => { if (g.obtained < E && g.released >= E) cur[i] = FS.usageAt(g, E - 1)[0]; });
      },
      changes: (E) => {
        let k = 0;
        while (k < changes.length && changes[k][0] < E) k++;
        return { next: () => (k < changes.length ? changes[k++] : null) };
      },
      colorKey: (i) => i % 2,
      color: (i) => (i % 2 ? "#b9cfe4" : "#cfdced"),
      // The share of the region in use then (drawn dark from its bottom; light: mapped and free),
      // at the usage point found from the one the last column read.
      fill: (i, e) => {
        const g = regions[i], u = g.usage, k = (point[i] = FS.usagePoint(g, e, point[i]));
        const mapped = k < 0 ? g.size : u[3 * k + 1], inUse = k < 0 ? 0 : u[3 * k + 2];
        return mapped ? Math.min(1, inUse / mapped) : 0;
      },
      match: () => null,
      lines: (item, e) => {
        const head = "after event " + e;
        if (item === null) return [head];
        if (item < 0) return [head, "regions thinner than a pixel here, merged: zoom in to see them one by one"];
        return [head].concat(FS.regionLines(r, regions[item], e));
      },
      pin: (i, e) => FS.pinRegion(r, regions[i], e),
      marks: FS.marksOf(r, dev.device, dev.space),
      stop: FS.slotStop(h, slot),
      timeOf: cl && h.timed !== false ? cl.timeOf : null,
      eventAt: cl ? cl.eventAt : null,
    };
    const pinnedOf = () => {
      const p = FS.pinned();
      return p && p.run === r && p.region !== undefined ? regions.findIndex((g) => g.index === p.region) : -1;
    };
    return FS.stackChart(wrap, { src: src, key: FS.keyOf(dev), cls: "segchart", height: 200, pinned: pinnedOf });
  }
  runs.forEach((r) => {
    const h = r.history, bySlot = new Map();
    FS.regionsOf(r).forEach((g) => {
      if (!bySlot.has(g.slot)) bySlot.set(g.slot, []);
      bySlot.get(g.slot).push(g);
    });
    [...bySlot.keys()].sort((a, b) => FS.byDevice({ device: h.slots[a][0], space: h.slots[a][1] },
      { device: h.slots[b][0], space: h.slots[b][1] })).forEach((slot) => chart(r, slot, bySlot.get(slot)));
  });
  box.appendChild(el("p", { class: "note" },
    "Each band is one region the allocator held (a segment, an expandable segment's reservation, a BFC region, a " +
    "pool's chunk), from when it was obtained to when it was released, as tall as the bytes mapped in it, stacked in " +
    "the order they were obtained: the top is the reserved memory. Dark: the bytes in use in it. A band that ends " +
    "was released: hover it for what released it (empty_cache, an allocation that made the allocator give its cache " +
    "back to retry, a trim) and when; brown dashed lines are the program's empty_cache calls."));
})();
