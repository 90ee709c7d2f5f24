/* nmt serve page: the alignment heatmap (target rows x source columns) and, for the
   fixed-vector model, the panel showing that every step reads the same single vector.
   Both return {node, target(k), source(j), clear()} so that a pane can light them. */
"use strict";
(function (NMT) {
  const LABEL_CHARS = 14, MIN_CELL = 14, PANEL_ROWS = 20;
  const short = (p) => {
    const s = NMT.showPiece(p);
    return s.length > LABEL_CHARS ? s.slice(0, LABEL_CHARS - 1) + "\u2026" : s;
  };
  /** White to dark blue; small weights stay visible (gamma 0.7). */
  NMT.weightColor = function (w) {
    const v = Math.pow(Math.max(0, Math.min(1, w)), 0.7);
    const c = (a, b) => Math.round(a + (b - a) * v);
    return `rgb(${c(255, 8)},${c(255, 48)},${c(255, 107)})`;
  };

  /** Per word, [its first piece, its last piece] (words: the word of each piece, -1 none). */
  const spans = (words) => {
    const out = [];
    words.forEach((w, p) => { if (w >= 0) out[w] = out[w] ? [out[w][0], p] : [p, p]; });
    return out;
  };

  /** Word links over the cells: each reference link (i, j) outlined as the block of source
      word i's columns and target word j's rows; each of the head's own links a dot in the
      block's middle (class hit where the reference has it, else miss). */
  function linkMarks(m, left, top, cs) {
    const g = NMT.svg("g", {class: "links"}), sw = spans(m.srcWord), tw = spans(m.tgtWord);
    const box = (i, j) => (sw[i] && tw[j] ? {x: left + sw[i][0] * cs, y: top + tw[j][0] * cs,
      w: (sw[i][1] - sw[i][0] + 1) * cs, h: (tw[j][1] - tw[j][0] + 1) * cs} : null);
    const inRef = new Set(m.ref.map(([i, j]) => `${i}-${j}`));
    m.ref.forEach(([i, j]) => {
      const b = box(i, j);
      if (b) g.append(NMT.svg("rect", {class: "ref-link", x: b.x + 1, y: b.y + 1, width: b.w - 2,
                                       height: b.h - 2, "data-i": i, "data-j": j}));
    });
    m.own.forEach(([i, j]) => {
      const b = box(i, j);
      if (b) g.append(NMT.svg("circle", {class: "own-link " + (inRef.has(`${i}-${j}`) ? "hit" : "miss"),
        cx: b.x + b.w / 2, cy: b.y + b.h / 2, r: Math.max(2.5, cs * 0.18), "data-i": i, "data-j": j}));
    });
    return g;
  }

  /** The heatmap of matrix (T x S) with the pieces as labels (data-t, data-s); with
      marks ({ref, own: [[i, j], ...], srcWord, tgtWord}), the word links over it. */
  NMT.heatmap = function (srcPieces, tgtPieces, matrix, marks) {
    const S = srcPieces.length, T = matrix.length;
    // cells never under 14 px, so that labels (11 px) stay apart at any length: a long
    // sentence's heatmap grows and its box scrolls (CSS), rather than labels overlapping
    const cs = Math.max(MIN_CELL, Math.min(22, Math.floor(540 / Math.max(S, 1))));
    const longest = (xs) => Math.max(3, ...xs.map((p) => short(p).length));
    const left = Math.min(120, 10 + 6.5 * longest(tgtPieces.slice(0, T)));
    const top = Math.min(100, 14 + 4.8 * longest(srcPieces));
    const width = left + S * cs + 4, height = top + T * cs + 4;
    const svg = NMT.svg("svg", {width, height, viewBox: `0 0 ${width} ${height}`,
                                class: "heatmap-svg", role: "img",
                                "aria-label": "attention weights"});
    const cells = NMT.svg("g", {class: "cells"});
    for (let t = 0; t < T; t++) {
      for (let s = 0; s < S; s++) {
        cells.append(NMT.svg("rect", {x: left + s * cs, y: top + t * cs, width: cs, height: cs,
                                      fill: NMT.weightColor(matrix[t][s]), "data-t": t,
                                      "data-s": s}));
      }
    }
    svg.append(cells);
    if (marks) svg.append(linkMarks(marks, left, top, cs));
    const tl = [], sl = [];
    for (let t = 0; t < T; t++) {
      const node = NMT.svg("text", {x: left - 4, y: top + t * cs + cs * 0.72, "text-anchor": "end",
                                    class: "tlabel", "data-t": t, text: short(tgtPieces[t])});
      tl.push(node); svg.append(node);
    }
    for (let s = 0; s < S; s++) {
      const x = left + s * cs + cs * 0.65, y = top - 4;
      const node = NMT.svg("text", {x, y, transform: `rotate(-55 ${x} ${y})`, class: "slabel",
                                    "data-s": s, text: short(srcPieces[s])});
      sl.push(node); svg.append(node);
    }
    const row = NMT.svg("rect", {class: "hl-row", x: left, width: S * cs, height: cs, visibility: "hidden"});
    const col = NMT.svg("rect", {class: "hl-col", y: top, width: cs, height: T * cs, visibility: "hidden"});
    svg.append(row, col);
    const hideAll = () => {
      row.setAttribute("visibility", "hidden"); col.setAttribute("visibility", "hidden");
      tl.concat(sl).forEach((n) => n.classList.remove("hl"));
    };
    return {
      node: svg,
      target(k) {
        hideAll();
        if (k >= T) return;
        row.setAttribute("y", top + k * cs); row.setAttribute("visibility", "visible");
        tl[k].classList.add("hl");
      },
      source(j) {
        hideAll();
        if (j >= S) return;
        col.setAttribute("x", left + j * cs); col.setAttribute("visibility", "visible");
        sl[j].classList.add("hl");
      },
      clear: hideAll,
    };
  };

  /** The fixed-vector model: every source piece feeds one vector c, computed once from
      the encoder's final states, and every target step reads that same c. At most
      PANEL_ROWS labels a column: a long sentence's pieces go in more columns, so the panel
      stays as short as a 20-piece one. */
  NMT.fixedPanel = function (srcPieces, tgtPieces) {
    const S = srcPieces.length, T = tgtPieces.length, rowH = 15;
    const colsOf = (n) => Math.max(1, Math.ceil(n / PANEL_ROWS));
    const perCol = (n) => Math.max(1, Math.ceil(n / colsOf(n)));
    const colW = (xs) => 14 + 6.5 * Math.max(3, ...xs.map((p) => short(p).length));
    const sw = colW(srcPieces), tw = colW(tgtPieces);
    const rows = Math.max(perCol(S), perCol(T));
    const mid = Math.max(200, 520 - colsOf(S) * sw - colsOf(T) * tw);
    const width = colsOf(S) * sw + mid + colsOf(T) * tw, height = rows * rowH + 30;
    const sx = colsOf(S) * sw, tx = sx + mid, cx = sx + mid / 2, cy = height / 2;
    const svg = NMT.svg("svg", {width, height, viewBox: `0 0 ${width} ${height}`,
                                class: "fixed-svg", role: "img",
                                "aria-label": "one fixed context vector for every step"});
    // piece i of n: column i / perCol (reading order: down, then the next column)
    const at = (n, i) => {
      const per = perCol(n), col = Math.floor(i / per), row = i % per;
      const inCol = Math.min(per, n - col * per);
      return [col, 18 + row * rowH + (rows - inCol) * rowH / 2];
    };
    const inWires = [], outWires = [], sl = [], tl = [];
    for (let s = 0; s < S; s++) {
      const [col, y] = at(S, s), x = sx - (colsOf(S) - 1 - col) * sw;
      const w = NMT.svg("line", {x1: x + 4, y1: y - 4, x2: cx - 34, y2: cy, class: "wire", "data-s": s});
      inWires.push(w); svg.append(w);
      const label = NMT.svg("text", {x, y, "text-anchor": "end", class: "slabel", "data-s": s,
                                     text: short(srcPieces[s])});
      sl.push(label); svg.append(label);
    }
    for (let t = 0; t < T; t++) {
      const [col, y] = at(T, t), x = tx + col * tw;
      const w = NMT.svg("line", {x1: cx + 34, y1: cy, x2: x - 4, y2: y - 4, class: "wire", "data-t": t});
      outWires.push(w); svg.append(w);
      const label = NMT.svg("text", {x, y, class: "tlabel", "data-t": t, text: short(tgtPieces[t])});
      tl.push(label); svg.append(label);
    }
    const box = NMT.svg("rect", {x: cx - 34, y: cy - 18, width: 68, height: 36, rx: 6, class: "vector"});
    svg.append(box, NMT.svg("text", {x: cx, y: cy - 2, "text-anchor": "middle", text: "c"}),
               NMT.svg("text", {x: cx, y: cy + 12, "text-anchor": "middle", text: "one vector"}));
    const all = inWires.concat(outWires, sl, tl, [box]);
    const clear = () => all.forEach((n) => n.classList.remove("hl"));
    return {
      node: svg,
      target(k) {  // step k reads c, and c holds every source piece alike
        clear();
        if (k >= T) return;
        box.classList.add("hl"); outWires[k].classList.add("hl"); tl[k].classList.add("hl");
        inWires.forEach((n) => n.classList.add("hl"));
      },
      source(j) {  // piece j reaches every step only through c
        clear();
        if (j >= S) return;
        box.classList.add("hl"); inWires[j].classList.add("hl"); sl[j].classList.add("hl");
        outWires.forEach((n) => n.classList.add("hl"));
      },
      clear,
    };
  };
})(window.NMT);
