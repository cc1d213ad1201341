// Live bytes by call site (issue 24): an icicle of the live buffers by stack frame — the root
// holds every live byte, each row below one frame deeper (outermost first), each node as wide as
// the bytes of the buffers whose stacks pass through it — at each space's peak, at the OOMs, and
// at the allocator-state view's event (fragsim's snapshot at or before it); beside it the same
// grouping as a table (the report's by_stack). fragsim grouped the bytes (flame_json,
// sim/by_stack.cpp); this file lays the nodes out. Hover a node for its frame, bytes, share and
// buffers; click to zoom into it, click the root to zoom out.
"use strict";
(function () {
  const FS = window.FS, data = FS.data, el = FS.el, bytes = FS.bytes, pct = FS.pct;
  const box = document.getElementById("stacks");
  const runs = data.runs.filter((r) => r.moments.some((m) => m.flame && m.flame.nodes.length > 1) ||
    (r.history && r.history.keyframes.length));
  if (!runs.length) return;
  box.appendChild(el("h2", {}, "Live bytes by call site"));
  const W = 900, RH = 18;

  function icicle(target, flame, title) {
    while (target.firstChild) target.removeChild(target.firstChild);
    target.appendChild(el("div", { class: "maptitle" }, title));
    const nodes = flame.nodes, names = flame.names;
    if (!nodes.length || !nodes[0][2]) {
      target.appendChild(el("div", { class: "note" }, "no live buffer"));
      return;
    }
    const kids = nodes.map(() => []);
    nodes.forEach((n, i) => { if (n[1] >= 0) kids[n[1]].push(i); });
    let root = 0;
    const depthOf = (i) => { let d = 0; for (let p = nodes[i][1]; p >= 0; p = nodes[p][1]) d++; return d; };
    const maxDepth = Math.max(...nodes.map((n, i) => depthOf(i)));
    const c = el("canvas", { class: "flame", width: W, height: (maxDepth + 1) * RH });
    c.style.border = "1px solid #ccc";
    target.appendChild(c);
    const ctx = c.getContext("2d");
    let boxes = [];  // [x0, x1, depth, node]
    function layout(i, x0, x1, d) {
      boxes.push([x0, x1, d, i]);
      let x = x0;
      kids[i].forEach((k) => {
        const w = (nodes[k][2] / Math.max(1, nodes[i][2])) * (x1 - x0);
        layout(k, x, x + w, d + 1);
        x += w;
      });
    }
    function draw() {
      boxes = [];
      const d0 = depthOf(root);
      layout(root, 0, W, 0);
      boxes.forEach((b) => { b[2] += 0; });
      ctx.clearRect(0, 0, c.width, c.height);
      ctx.font = "11px sans-serif";
      boxes.forEach(([x0, x1, d, i]) => {
        if (x1 - x0 < 0.5) return;
        const name = names[nodes[i][0]];
        ctx.fillStyle = i === root && d0 > 0 ? "#bbb" : FS.hashColor(name);
        ctx.fillRect(x0, d * RH, Math.max(0.5, x1 - x0 - 1), RH - 1);
        if (x1 - x0 > 40) {
          ctx.fillStyle = "#000";
          ctx.save();
          ctx.beginPath(); ctx.rect(x0, d * RH, x1 - x0 - 2, RH); ctx.clip();
          // The size stays whole: a name too long for the box gives way, cut with an ellipsis.
          const size = " " + bytes(nodes[i][2]), room = x1 - x0 - 6;
          let label = name.replace(/^.*\//, "");
          if (ctx.measureText(label + size).width > room) {
            while (label.length > 1 && ctx.measureText(label + "…" + size).width > room)
              label = label.slice(0, Math.floor(label.length * 0.8));
            label += "…";
          }
          ctx.fillText(label + size, x0 + 3, d * RH + 13);
          ctx.restore();
        }
      });
    }
    const at = (evt) => {
      const rect = c.getBoundingClientRect();
      const x = ((evt.clientX - rect.left) / rect.width) * W, d = Math.floor(((evt.clientY - rect.top) / rect.height) * c.height / RH);
      return boxes.find(([x0, x1, bd]) => bd === d && x >= x0 && x < x1);
    };
    c.addEventListener("mousemove", (evt) => {
      const b = at(evt);
      if (!b) { FS.hideTip(); return; }
      const n = nodes[b[3]];
      FS.showTip(evt, [names[n[0]], bytes(n[2]) + " (" + pct(n[2] / nodes[0][2]) + " of the live bytes) in " + n[3] +
        " buffer" + (n[3] === 1 ? "" : "s"), "click: zoom in (the root: zoom out)"]);
    });
    c.addEventListener("mouseleave", FS.hideTip);
    c.addEventListener("click", (evt) => {
      const b = at(evt);
      if (!b) return;
      root = b[3] === root ? (nodes[root][1] >= 0 ? 0 : 0) : b[3];
      draw();
    });
    draw();
    if (FS.probing) {  // hover along the root row and a deeper one: each answer is a node there
      const rect = c.getBoundingClientRect();
      const res = { flame: title, probes: 0, agree: 0 };
      for (let k = 0; k < 50; k++)
        for (const d of [0, Math.min(maxDepth, 2)]) {
          const evt = { clientX: Math.round(rect.left + (k + 0.5) * rect.width / 50), clientY: Math.round(rect.top + (d + 0.5) * RH) };
          FS.tip.style.display = "none";
          c.dispatchEvent(new MouseEvent("mousemove", evt));
          const b = at(evt);
          res.probes++;
          if (b ? FS.tip.textContent.startsWith(names[nodes[b[3]][0]]) : FS.tip.style.display !== "block") res.agree++;
        }
      FS.hideTip();
      FS.probeOut.push(res);
    }
  }

  function table(target, bs) {
    if (!bs || !bs.sites) return;
    const t = el("table", { class: "by-stack" });
    const hr = el("tr");
    ["live bytes", "share", "buffers", "call site"].forEach((h) => hr.appendChild(el("th", {}, h)));
    t.appendChild(hr);
    bs.sites.slice(0, 15).forEach((s) => {
      const row = el("tr", { class: "site-row" });
      [bytes(s.bytes), pct(s.share), String(s.buffers), s.site].forEach((v) => row.appendChild(el("td", {}, v)));
      t.appendChild(row);
    });
    target.appendChild(el("div", { class: "maptitle" }, "by call site (" + bytes(bs.live_bytes) + " in " + bs.buffers +
      " live buffers; " + bs.site_count + " sites)"));
    target.appendChild(t);
  }

  runs.forEach((r) => {
    const wrap = el("div", { class: "flamebox" });
    wrap.appendChild(el("h3", {}, FS.runName(r) + ": live bytes by stack frame"));
    const pick = el("select", { class: "flame-select" });
    const choices = [];
    r.moments.forEach((m) => { if (m.flame) choices.push({ title: m.title, flame: () => m.flame, table: () => FS.at(r.report, m.path).by_stack }); });
    if (r.history && r.history.keyframes.length)
      choices.push({ title: "at the allocator state's event (fragsim's snapshot at or before it)", scrub: true });
    choices.forEach((c, i) => pick.appendChild(el("option", { value: i }, c.title)));
    wrap.appendChild(pick);
    const target = el("div", { class: "flame-target" });
    wrap.appendChild(target);
    box.appendChild(wrap);
    let scrubbed = r.history && r.history.keyframes.length ? r.history.keyframes[0] : null;
    function show() {
      const ch = choices[pick.value];
      if (!ch) return;
      if (ch.scrub) {
        const k = scrubbed;
        icicle(target, k.flame, "after event " + k.event.toLocaleString() + " (fragsim's snapshot)");
        table(target, k.by_stack);
      } else {
        icicle(target, ch.flame(), ch.title);
        table(target, ch.table());
      }
    }
    pick.addEventListener("change", show);
    FS.onScrub = FS.onScrub || [];
    FS.onScrub.push((run, e, k) => {
      if (run !== r || !k) return;
      scrubbed = k;
      if (choices[pick.value] && choices[pick.value].scrub) show();
    });
    if (FS.probing) choices.forEach((c, i) => { pick.value = i; show(); });
    pick.value = 0;
    show();
  });
  box.appendChild(el("p", { class: "note" },
    "Each row is one stack frame deeper (outermost at the top); a node is as wide as the live bytes of the buffers " +
    "whose stacks pass through it. Buffers without a stack are grouped by name. The table groups the same bytes by " +
    "call site (the buffer's name, else its innermost frame)."));
})();
