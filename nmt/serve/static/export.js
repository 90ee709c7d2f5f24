/* nmt serve page: export every view in one click. Each heatmap and fixed-vector panel as
   PNG and SVG and the numbers behind it as JSON; the study plot as PNG, SVG and CSV; the
   current view as one standalone HTML file that opens without the server. Everything is
   made in the browser (no request leaves the page: it works offline). */
"use strict";
(function (NMT) {
  // computed styles copied onto each exported SVG node, so that the file looks as the
  // page does without the page's stylesheet
  const PROPS = ["fill", "fill-opacity", "stroke", "stroke-width", "stroke-dasharray", "opacity",
                 "visibility", "font-family", "font-size", "font-weight"];

  /** Save blob as a file called name (the browser's download). */
  NMT.download = function (name, blob) {
    const a = NMT.el("a", {href: URL.createObjectURL(blob), download: name});
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 10000);
  };

  /** A file-name-safe form of s. */
  NMT.fileName = (s) => String(s).replace(/[^A-Za-z0-9_.-]+/g, "_").slice(0, 60);

  /** The SVG node as a standalone SVG document (styles inlined, white background). */
  NMT.svgText = function (node) {
    const copy = node.cloneNode(true);
    const src = [node, ...node.querySelectorAll("*")];
    const dst = [copy, ...copy.querySelectorAll("*")];
    src.forEach((n, i) => {
      const cs = getComputedStyle(n);
      dst[i].setAttribute("style", PROPS.map((p) => `${p}:${cs.getPropertyValue(p)}`).join(";"));
    });
    const w = node.getAttribute("width"), h = node.getAttribute("height");
    copy.insertBefore(NMT.svg("rect", {x: 0, y: 0, width: w, height: h, fill: "#fff"}),
                      copy.firstChild);
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + new XMLSerializer().serializeToString(copy);
  };

  NMT.saveSvg = (node, name) =>
    NMT.download(name, new Blob([NMT.svgText(node)], {type: "image/svg+xml"}));

  /** The SVG node drawn at twice its size into a PNG file. */
  NMT.savePng = function (node, name) {
    const w = Number(node.getAttribute("width")), h = Number(node.getAttribute("height"));
    const img = new Image();
    img.onload = () => {
      const canvas = document.createElement("canvas");
      canvas.width = 2 * w; canvas.height = 2 * h;
      const ctx = canvas.getContext("2d");
      ctx.scale(2, 2);
      ctx.drawImage(img, 0, 0, w, h);
      canvas.toBlob((b) => NMT.download(name, b), "image/png");
    };
    img.src = "data:image/svg+xml;charset=utf-8," + encodeURIComponent(NMT.svgText(node));
  };

  NMT.saveJson = (data, name) =>
    NMT.download(name, new Blob([JSON.stringify(data, null, 1)], {type: "application/json"}));

  /** A row of buttons; formats: {PNG: fn, SVG: fn, ...}. */
  NMT.exportBar = function (what, formats) {
    return NMT.el("div", {class: "export-bar"}, NMT.el("span", {class: "hint", text: `save ${what}: `}),
      ...Object.entries(formats).map(([f, fn]) => NMT.el("button", {
        type: "button", class: "export", "data-format": f.toLowerCase(), text: f, onclick: fn})));
  };

  /** The numbers behind a pane's view: tokens, weights (as shown) and scores. */
  NMT.paneData = function (pane) {
    const h = pane.hyp, line = pane.line;
    return {model: pane.id, attention: pane.result.attention, fixed_vector: pane.fixed,
            decoding: pane.result.decoding, source: line.source, src_pieces: line.src_pieces,
            reference: line.reference, hypothesis_rank: pane.sel + 1,
            shown: (pane.fixed ? "one fixed vector" : pane.head ? `head ${pane.head}` : "mean over heads") +
              (pane.refv ? ", teacher-forced reference" : ""),
            text: h.text, tgt_pieces: h.tgt_pieces, score: h.score, log_prob: h.log_prob,
            token_logprobs: h.token_logprobs, weights: pane.matrix(), heads: h.heads,
            alignment: h.alignment, forced: h.forced, complete: h.complete,
            bleu: h.bleu, chrf: h.chrf,
            // the reference view: the weights above are the teacher-forced reference's
            reference_view: pane.refv ? {...pane.refv, alignment: NMT.reference} : null};
  };

  /** The export buttons of a pane's heatmap or fixed-vector panel. */
  NMT.paneExports = function (pane) {
    const base = `${NMT.fileName(pane.id)}_${pane.fixed ? "fixed_vector" : "attention"}`;
    const svg = () => pane.vis.node;
    return NMT.exportBar(pane.fixed ? "panel" : "heatmap", {
      PNG: () => NMT.savePng(svg(), `${base}.png`), SVG: () => NMT.saveSvg(svg(), `${base}.svg`),
      JSON: () => NMT.saveJson(NMT.paneData(pane), `${base}.json`)});
  };

  /** The study plot's numbers: one CSV row per bucket and system. */
  NMT.studyCsv = function () {
    const ts = NMT.study.set, q = (v) => (v === null || v === undefined ? "" :
      /[",\n]/.test(String(v)) ? `"${String(v).replace(/"/g, '""')}"` : String(v));
    const rows = [["study", "test_set", "bucket", "system", "n", "bleu", "bleu_low", "bleu_high",
                   "chrf", "len_ratio", "brevity_penalty"]];
    ts.buckets.forEach((b) => ts.systems.forEach((name) => {
      const r = b.rows[name];
      if (!r) return;
      const bl = r.bleu || {}, cf = r.chrf || {};  // null in a bucket the study found empty
      rows.push([NMT.study.data.name, ts.name, b.label, name, r.n, bl.score, bl.low, bl.high,
                 cf.score, r.len_ratio, r.brevity_penalty]);
    }));
    return rows.map((r) => r.map(q).join(",")).join("\n") + "\n";
  };

  NMT.studyExports = function () {
    const base = () => `study_${NMT.fileName(NMT.study.data.name)}_${NMT.fileName(NMT.study.set.name)}`;
    const svg = () => document.querySelector("#study-plot svg");
    return NMT.exportBar("plot", {
      PNG: () => NMT.savePng(svg(), `${base()}.png`), SVG: () => NMT.saveSvg(svg(), `${base()}.svg`),
      CSV: () => NMT.download(`${base()}.csv`, new Blob([NMT.studyCsv()], {type: "text/csv"}))});
  };

  const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"})[c]);

  /** The current view (the translate columns, or the study plot and its bucket) as one
      HTML file: the page's stylesheet inlined, the view's nodes as they are, the answer's
      numbers in a JSON script block. It loads nothing, so it opens without the server. */
  NMT.saveHtml = async function () {
    const css = await (await fetch("/static/style.css")).text();
    const study = NMT.state.tab === "study";
    const parts = study ? ["study-plot", "bucket-list"] : ["columns"];
    const nodes = parts.map((id) => {
      const n = document.getElementById(id).cloneNode(true);
      n.querySelectorAll(".export-bar, button.export").forEach((x) => x.remove());
      return n.outerHTML;
    });
    const title = study ? `study ${NMT.state.study}` : NMT.state.src;
    const data = JSON.stringify(study ? (NMT.study.set || null) : (NMT.lastAnswer || null))
      .replace(/</g, "\\u003c");
    const html = `<!doctype html>\n<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<title>nmt serve: ${esc(title)}</title><style>${css}</style></head>
<body><header><h1>nmt serve <small>saved view, ${esc(new Date().toISOString())}</small></h1></header>
<main><p class="hint">${esc(study ? `study ${NMT.state.study}, ${NMT.state.sset}` : `source: ${NMT.state.src}`)}</p>
${nodes.join("\n")}
<script type="application/json" id="nmt-data">${data}</script></main></body></html>\n`;
    NMT.download(`nmt_view_${study ? "study" : "translate"}.html`, new Blob([html], {type: "text/html"}));
  };
})(window.NMT);
