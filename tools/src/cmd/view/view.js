// roce view: the page's script. Everything it shows was worked out by `roce view` (Rust) and
// sits in the JSON of #view-data: this script only lays it out. It draws the ladder of the
// selected flow and its reverse in chunks around the scroll position (never the whole page
// of frames at once), and fills #frame-details with the explanation `roce decode` gives.
// Text from the capture is only ever set as textContent, never parsed as markup.
"use strict";
(function () {
  const D = JSON.parse(document.getElementById("view-data").textContent);
  const S = D.tables.s, F = D.tables.f, H = D.tables.h, P = D.tables.p;
  const R = D.rows, A = D.analysis;
  const K = { REQ: 1, RETX: 2, NAK: 4, RNR: 8, CNP: 16, CE: 32, IMPLIED: 64, BAD: 128,
    RESENT: 256, MALFORMED: 512, NOTROCE: 1024, PAUSE: 2048 };
  // Pause frames by row: the MAC (string index) of the port that sent them.
  const pauseMac = new Map(R.pf);
  let flowMacs = null;   // the selected flow's [source MAC, destination MAC], if known
  const SVG = "http://www.w3.org/2000/svg";
  // Rows drawn around the scroll position: a chunk holds CHUNK rows, and the chunk in view is
  // drawn with its neighbours, so scrolling redraws only when a chunk boundary is crossed.
  const CHUNK = 400;
  const ladder = document.getElementById("ladder");
  const space = document.getElementById("ladder-space");
  const svg = document.getElementById("ladder-svg");
  const head = document.getElementById("ladder-head");
  const panel = document.getElementById("frame-details");
  const select = document.getElementById("flow-select");
  const count = document.getElementById("ladder-count");
  const gotoInput = document.getElementById("goto");

  const rowOfFrame = new Map();
  for (let i = 0; i < R.n.length; i++) rowOfFrame.set(R.n[i], i);
  let flow = D.initial_flow;
  let rowH = 36;
  let shown = [];        // row indices of the selected flow pair, in frame order
  let posOf = new Map(); // row index -> position in `shown`
  let selected = -1;     // row index
  let drawn = [-1, -1];  // positions drawn
  let idle = Infinity;   // a gap longer than this between two drawn frames is marked

  function el(tag, attrs, text) {
    const e = document.createElement(tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function sv(tag, attrs, text) {
    const e = document.createElementNS(SVG, tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  // The analysis pairs connected flows; datagram flows (QP1's rdma_cm MADs, UD) are drawn
  // with the one flow that goes back between the same two QPs' hosts, if there is exactly one.
  function reverseOf(f) {
    const x = A.flows[f];
    if (!x) return null;
    if (x.reverse_flow !== null && x.reverse_flow !== undefined) return x.reverse_flow;
    const back = [];
    A.flows.forEach(function (y, g) {
      if (y.src === x.dst && y.dst === x.src && y.dest_qp === x.dest_qp && y.reverse_flow === null) back.push(g);
    });
    return back.length === 1 ? back[0] : null;
  }
  function time(us) {
    if (us < 1000) return "+" + us.toFixed(3) + " us";
    if (us < 1e6) return "+" + (us / 1000).toFixed(3) + " ms";
    return "+" + (us / 1e6).toFixed(4) + " s";
  }
  function kindClass(k) {
    if (k & K.PAUSE) return "k-pause";
    if (k & K.BAD) return "k-bad";
    if (k & K.NAK) return "k-nak";
    if (k & K.RNR) return "k-rnr";
    if (k & K.CNP) return "k-cnp";
    if (k & (K.RETX | K.RESENT | K.IMPLIED)) return "k-retx";
    return (k & K.REQ) ? "k-req" : "k-resp";
  }

  // ---- flows ----
  function flowName(f) {
    const x = A.flows[f];
    return "flow " + f + ": " + x.src + " \u2192 " + x.dst + " QP 0x" + x.dest_qp.toString(16) +
      " (" + x.packets + " packets)";
  }
  A.flows.forEach(function (_, f) { select.appendChild(el("option", { value: f }, flowName(f))); });
  select.addEventListener("change", function () { setFlow(Number(select.value)); });
  document.querySelectorAll("[data-flow-row]").forEach(function (tr) {
    const f = Number(tr.getAttribute("data-flow-row"));
    tr.addEventListener("click", function () { setFlow(f); ladder.focus(); });
    tr.addEventListener("keydown", function (e) {
      if (e.key === "Enter") { setFlow(f); ladder.focus(); }
    });
  });
  document.querySelectorAll("[data-goto]").forEach(function (a) {
    a.addEventListener("click", function (e) {
      e.preventDefault();
      goTo(Number(a.getAttribute("data-goto")));
    });
  });

  function setFlow(f) {
    if (f === null || f === undefined || !A.flows[f]) return;
    flow = f;
    select.value = String(f);
    document.querySelectorAll("[data-flow-row]").forEach(function (tr) {
      tr.classList.toggle("current", Number(tr.getAttribute("data-flow-row")) === f);
    });
    const rev = reverseOf(f);
    flowMacs = R.fm[f] || null;
    shown = [];
    posOf = new Map();
    for (let i = 0; i < R.n.length; i++) {
      // A pause frame from either end's MAC is part of the exchange: drawn from that end.
      const paused = pauseMac.has(i) && flowMacs !== null && flowMacs.indexOf(pauseMac.get(i)) >= 0;
      if (R.fl[i] === f || (rev !== null && R.fl[i] === rev) || paused) {
        posOf.set(i, shown.length);
        shown.push(i);
      }
    }
    const x = A.flows[f];
    head.textContent = "";
    const leftQp = rev !== null ? "QP 0x" + A.flows[rev].dest_qp.toString(16) : "QP ?";
    head.appendChild(el("span", { class: "end left" }, x.src + "  " + leftQp));
    head.appendChild(el("span", { class: "end right" }, x.dst + "  QP 0x" + x.dest_qp.toString(16)));
    // Idle gaps (a timeout, an RNR wait, a paused link) stand out against the usual spacing.
    const gaps = [];
    for (let p = 1; p < shown.length; p++) gaps.push(R.t[shown[p]] - R.t[shown[p - 1]]);
    gaps.sort(function (a, b) { return a - b; });
    idle = gaps.length ? Math.max(50, 20 * gaps[Math.floor(gaps.length / 2)]) : Infinity;
    count.textContent = shown.length
      ? shown.length + " frames of this exchange in the page" +
        (shown.length > 3 * CHUNK ? " (drawn a chunk at a time as you scroll)" : "")
      : "none of this exchange's " + x.packets + " frames is in the page: roce view " + D.file +
        " --flow " + f + " makes a page of them";
    drawn = [-1, -1];
    layout();
  }

  // ---- the ladder ----
  function geometry() {
    const w = Math.max(ladder.clientWidth - 4, 520);
    return { w: w, left: 150, right: w - 190 };
  }
  function layout() {
    space.style.height = (shown.length * rowH + 20) + "px";
    draw(true);
  }
  function draw(force) {
    const first = Math.floor(ladder.scrollTop / rowH);
    const chunk = Math.floor(first / CHUNK);
    const from = Math.max(0, (chunk - 1) * CHUNK);
    const to = Math.min(shown.length, (chunk + 2) * CHUNK);
    if (!force && from === drawn[0] && to === drawn[1]) return;
    drawn = [from, to];
    const g = geometry();
    svg.setAttribute("width", g.w);
    svg.setAttribute("height", shown.length * rowH + 20);
    svg.textContent = "";
    svg.appendChild(sv("line", { x1: g.left, y1: 0, x2: g.left, y2: shown.length * rowH + 20, class: "life" }));
    svg.appendChild(sv("line", { x1: g.right, y1: 0, x2: g.right, y2: shown.length * rowH + 20, class: "life" }));
    const frag = document.createDocumentFragment();
    for (const band of D.pauses) pauseBand(band, from, to, g, frag);
    for (let p = from; p < to; p++) frag.appendChild(rowElement(shown[p], p, g));
    let lane = 0;
    for (const s of D.spans) {
      const a = rowOfFrame.get(s[0]), b = rowOfFrame.get(s[1]);
      if (!posOf.has(a) || !posOf.has(b)) continue;
      const pa = posOf.get(a), pb = posOf.get(b);
      if (pb < from || pa >= to) continue;
      // Brackets side by side in three lanes, each label at its bracket's start.
      const x = g.right + 16 + 44 * (lane % 3), y1 = pa * rowH + rowH / 2, y2 = pb * rowH + rowH / 2;
      lane++;
      const span = sv("g", { class: "span s-" + s[2] });
      span.appendChild(sv("path", { d: "M" + (x - 6) + "," + y1 + " H" + x + " V" + y2 + " H" + (x - 6) }));
      span.appendChild(sv("text", { x: x + 3, y: y1 + 4 + 12 * ((lane - 1) % 3) }, S[s[3]]));
      frag.appendChild(span);
    }
    svg.appendChild(frag);
  }
  function rowElement(i, p, g) {
    const k = R.k[i];
    const y = p * rowH;
    const out = pauseMac.has(i) ? flowMacs !== null && pauseMac.get(i) === flowMacs[0] : R.fl[i] === flow;
    const cls = kindClass(k);
    const row = sv("g", { class: "row " + cls + (i === selected ? " selected" : ""),
      "data-frame": R.n[i], "data-flow": R.fl[i], "data-row": i });
    row.appendChild(sv("rect", { x: 0, y: y, width: g.w, height: rowH, class: "hit" }));
    // Label above the arrow, the analysis's short note under it when there is room.
    const roomy = rowH >= 30;
    const top = y + (roomy ? 14 : rowH / 2 - 2);
    const drop = Math.min(rowH * 0.25, 8);
    row.appendChild(sv("text", { x: 4, y: top + 8, class: "num" }, "#" + R.n[i]));
    row.appendChild(sv("text", { x: 66, y: top + 8, class: "time" }, time(R.t[i])));
    const x1 = out ? g.left : g.right, x2 = out ? g.right : g.left;
    row.appendChild(sv("line", { x1: x1, y1: top, x2: x2, y2: top + drop, class: "arrow" +
      ((k & K.IMPLIED) ? " dashed" : ""), "marker-end": "url(#m-" + cls + ")" }));
    const tx = (g.left + g.right) / 2;
    row.appendChild(sv("text", { x: tx, y: top - 3, class: "label", "text-anchor": "middle" }, S[R.lab[i]]));
    if (R.note[i] >= 0 && roomy) {
      row.appendChild(sv("text", { x: tx, y: top + drop + 11, class: "note", "text-anchor": "middle" },
        S[R.note[i]]));
    }
    if (R.why[i] >= 0) row.appendChild(sv("title", {}, S[R.why[i]]));
    if (p > 0) {
      const gap = R.t[i] - R.t[shown[p - 1]];
      if (gap > idle) {
        row.appendChild(sv("line", { x1: 0, y1: y + 1, x2: g.w, y2: y + 1, class: "idle" }));
        row.appendChild(sv("text", { x: 4, y: y + 11, class: "idle" }, time(gap).slice(1) + " idle"));
      }
    }
    if (k & K.CE) {
      row.appendChild(sv("circle", { cx: tx, cy: top + drop / 2, r: 4, class: "ce" }));
    }
    return row;
  }
  // The first position in `shown` whose frame is at or after `us`.
  function firstAt(us) {
    let lo = 0, hi = shown.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (R.t[shown[mid]] < us) lo = mid + 1; else hi = mid;
    }
    return lo;
  }
  // A pause in force: a shaded band over the frames sent while it lasted, or a thin one
  // between two frames when none was.
  function pauseBand(band, from, to, g, frag) {
    const p1 = firstAt(band[0]), p2 = firstAt(band[1]) - 1;
    if (p1 >= to || Math.max(p1, p2) < from) return;
    const y1 = p1 * rowH, y2 = p2 >= p1 ? (p2 + 1) * rowH : y1 + 4;
    const gr = sv("g", { class: "pause", "data-pause-priority": band[2] });
    gr.appendChild(sv("rect", { x: 0, y: y1 - (p2 >= p1 ? 0 : 2), width: g.w, height: y2 - y1 }));
    // The label at the band's foot, clear of the arrow labels at the top of each row.
    const ly = p2 >= p1 ? y2 - 4 : y1 + 10;
    gr.appendChild(sv("text", { x: g.w - 4, y: ly, "text-anchor": "end" }, S[band[3]]));
    gr.appendChild(sv("title", {}, S[band[4]]));
    frag.appendChild(gr);
  }
  // Arrow heads, one per kind of row (the colour comes from the stylesheet).
  function markers() {
    const defs = sv("defs");
    for (const c of ["k-req", "k-resp", "k-retx", "k-nak", "k-rnr", "k-cnp", "k-bad", "k-pause"]) {
      const m = sv("marker", { id: "m-" + c, markerWidth: 10, markerHeight: 8, refX: 9, refY: 4,
        orient: "auto", markerUnits: "userSpaceOnUse", class: c });
      m.appendChild(sv("path", { d: "M0,0 L10,4 L0,8 z" }));
      defs.appendChild(m);
    }
    const holder = sv("svg", { width: 0, height: 0, "aria-hidden": "true" });
    holder.appendChild(defs);
    document.body.appendChild(holder);
  }

  ladder.addEventListener("scroll", function () { draw(false); });
  svg.addEventListener("click", function (e) {
    const row = e.target.closest("[data-row]");
    if (row) selectRow(Number(row.getAttribute("data-row")), false);
  });
  window.addEventListener("resize", function () { draw(true); });

  function zoom(factor) {
    const keep = selected >= 0 && posOf.has(selected) ? posOf.get(selected)
      : Math.floor(ladder.scrollTop / rowH);
    rowH = Math.max(14, Math.min(90, Math.round(rowH * factor)));
    layout();
    ladder.scrollTop = Math.max(0, keep * rowH - ladder.clientHeight / 2);
    draw(false);
  }
  document.getElementById("zoom-in").addEventListener("click", function () { zoom(1.25); });
  document.getElementById("zoom-out").addEventListener("click", function () { zoom(0.8); });

  function selectRow(i, scroll) {
    selected = i;
    svg.querySelectorAll(".row.selected").forEach(function (r) { r.classList.remove("selected"); });
    if (posOf.has(i)) {
      const p = posOf.get(i);
      if (scroll) {
        const y = p * rowH;
        if (y < ladder.scrollTop || y + rowH > ladder.scrollTop + ladder.clientHeight) {
          ladder.scrollTop = Math.max(0, y - ladder.clientHeight / 2);
        }
        draw(false);
      }
      const r = svg.querySelector('[data-row="' + i + '"]');
      if (r) r.classList.add("selected");
    }
    details(i);
  }
  function step(by) {
    if (!shown.length) return;
    let p = selected >= 0 && posOf.has(selected) ? posOf.get(selected) + by : (by > 0 ? 0 : shown.length - 1);
    p = Math.max(0, Math.min(shown.length - 1, p));
    selectRow(shown[p], true);
  }
  function goTo(n) {
    const i = rowOfFrame.get(n);
    if (i === undefined) {
      panel.textContent = "";
      panel.appendChild(el("p", { class: "missing" }, "Frame " + n + " is not in this page (frames " +
        D.page_from + "-" + D.page_to + "). Run roce view with --from " + n + " to see it."));
      return;
    }
    if (R.fl[i] >= 0 && R.fl[i] !== flow && reverseOf(flow) !== R.fl[i]) setFlow(R.fl[i]);
    selectRow(i, true);
  }
  gotoInput.addEventListener("keydown", function (e) {
    if (e.key === "Enter") { goTo(Number(gotoInput.value)); ladder.focus(); }
  });
  document.addEventListener("keydown", function (e) {
    if (e.target && (e.target.tagName === "INPUT" || e.target.tagName === "SELECT")) return;
    const keys = { ArrowDown: 1, j: 1, ArrowUp: -1, k: -1, PageDown: 20, PageUp: -20 };
    if (keys[e.key] !== undefined) { step(keys[e.key]); e.preventDefault(); }
    else if (e.key === "Home") { selectRow(shown[0], true); e.preventDefault(); }
    else if (e.key === "End") { selectRow(shown[shown.length - 1], true); e.preventDefault(); }
    else if (e.key === "+" || e.key === "=") zoom(1.25);
    else if (e.key === "-") zoom(0.8);
    else if (e.key === "g") { gotoInput.focus(); e.preventDefault(); }
  });

  // ---- the details panel ----
  function bytesOf(d) {
    const raw = atob(d[2]);
    const b = new Uint8Array(raw.length);
    for (let j = 0; j < raw.length; j++) b[j] = raw.charCodeAt(j);
    return b;
  }
  function hexDump(d) {
    const b = bytesOf(d), headLen = d[3], leftOut = d[4];
    const pre = el("pre", { class: "hex", "aria-label": "frame bytes" });
    let line = null, lineStart = -1;
    for (let j = 0; j < b.length; j++) {
      const off = j < headLen ? j : j + leftOut;
      if (j === headLen && leftOut > 0) {
        pre.appendChild(document.createTextNode("\n      \u2026 " + leftOut + " bytes not kept in the page \u2026"));
        line = null;
      }
      if (line === null || off - lineStart >= 16 || off % 16 === 0) {
        if (line !== null || pre.childNodes.length) pre.appendChild(document.createTextNode("\n"));
        lineStart = off - (off % 16);
        line = true;
        pre.appendChild(document.createTextNode(lineStart.toString(16).padStart(4, "0") + "  " +
          "   ".repeat(off - lineStart)));
      }
      const span = el("span", { "data-off": off }, b[j].toString(16).padStart(2, "0"));
      pre.appendChild(span);
      pre.appendChild(document.createTextNode(" "));
    }
    return pre;
  }
  function highlight(from, to) {
    panel.querySelectorAll(".hex .hl").forEach(function (s) { s.classList.remove("hl"); });
    if (from < 0) return;
    panel.querySelectorAll(".hex [data-off]").forEach(function (s) {
      const o = Number(s.getAttribute("data-off"));
      if (o >= from && o <= to) s.classList.add("hl");
    });
  }
  function details(i) {
    const d = D.details[i];
    panel.textContent = "";
    panel.appendChild(el("h2", { class: "summary" }, S[d[0]]));
    if (d[1] >= 0) panel.appendChild(el("p", { class: "comment" }, "Comment: " + S[d[1]]));
    if (R.why[i] >= 0) panel.appendChild(el("p", { class: "analysis" }, "Analysis: " + S[R.why[i]]));
    const table = el("table", { class: "explain" });
    for (const h of d[5]) {
      const hd = H[h];
      const body = el("tbody", { class: "header" });
      const tr = el("tr", { class: "title", "data-from": hd[3], "data-to": hd[3] + hd[4] - 1 });
      tr.appendChild(el("th", { colspan: 3 }, S[hd[0]]));
      tr.appendChild(el("td", { class: "range" }, S[hd[1]]));
      body.appendChild(tr);
      for (let j = 5; j < hd.length; j++) {
        const f = F[hd[j]];
        const row = el("tr", { class: "field", "data-from": f[4], "data-to": f[5], tabindex: 0 });
        row.appendChild(el("td", { class: "bits" }, S[f[0]]));
        row.appendChild(el("td", { class: "name" }, S[f[1]]));
        row.appendChild(el("td", { class: "value" }, S[f[2]]));
        row.appendChild(el("td", { class: "meaning" }, S[f[3]]));
        body.appendChild(row);
      }
      if (hd[2] >= 0) {
        const n = el("tr", { class: "note" });
        n.appendChild(el("td", { colspan: 4 }, S[hd[2]]));
        body.appendChild(n);
      }
      table.appendChild(body);
    }
    if (d[5].length) panel.appendChild(table);
    panel.appendChild(el("h3", {}, "Bytes"));
    panel.appendChild(hexDump(d));
    panel.appendChild(el("h3", {}, "roce decode --json"));
    const json = el("table", { class: "json" });
    for (const p of d[6]) {
      const tr = el("tr", { "data-key": S[P[p][0]], "data-value": S[P[p][1]] });
      tr.appendChild(el("td", { class: "key" }, S[P[p][0]]));
      tr.appendChild(el("td", { class: "val" }, S[P[p][1]]));
      json.appendChild(tr);
    }
    panel.appendChild(json);
    // A byte of the dump picks the narrowest field that holds it.
    panel.querySelectorAll(".hex [data-off]").forEach(function (span) {
      span.addEventListener("click", function () {
        const o = Number(span.getAttribute("data-off"));
        let best = null, width = Infinity;
        panel.querySelectorAll("tr[data-from]").forEach(function (tr) {
          const a = Number(tr.getAttribute("data-from")), b = Number(tr.getAttribute("data-to"));
          if (a >= 0 && a <= o && o <= b && b - a < width) { best = tr; width = b - a; }
        });
        if (best) { best.focus(); best.click(); }
      });
    });
    panel.querySelectorAll("tr[data-from]").forEach(function (tr) {
      const pick = function () {
        panel.querySelectorAll("tr.picked").forEach(function (t) { t.classList.remove("picked"); });
        tr.classList.add("picked");
        highlight(Number(tr.getAttribute("data-from")), Number(tr.getAttribute("data-to")));
      };
      tr.addEventListener("click", pick);
      tr.addEventListener("focus", pick);
    });
  }

  // ---- start ----
  markers();
  document.getElementById("page-range").textContent = R.n.length
    ? "frames " + D.page_from + "-" + D.page_to + " in detail" +
      (D.page_flow !== null ? " (the exchange of flow " + D.page_flow + ")" : "") +
      (R.n.length < D.frames_total ? "; --from and --count pick another page" : "")
    : "no frames in the page";
  if (flow !== null && flow !== undefined) setFlow(flow);
  else count.textContent = "no RoCEv2 flow in the page";
})();
