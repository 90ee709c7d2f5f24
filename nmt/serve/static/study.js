/* nmt serve page: the study tab. BLEU against source length for every model of a study
   report, with the 95% bands and the bucket counts; the current input's length is marked
   on the axis; clicking a bucket lists its sentences with each loaded model's output. */
"use strict";
(function (NMT) {
  const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#17becf",
                  "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"];
  NMT.study = {data: null, set: null};

  NMT.loadStudies = async function () {
    const {studies} = await NMT.api("/api/studies");
    const pick = document.getElementById("study");
    pick.replaceChildren(...studies.map((s) => NMT.el("option", {value: s.name, text: s.name})));
    document.getElementById("tab-study").disabled = !studies.length;
    if (!studies.length) {
      document.getElementById("study-note").textContent = "no study served (nmt serve --study reports/NAME)";
      return;
    }
    if (!studies.some((s) => s.name === NMT.state.study)) NMT.state.study = studies[0].name;
    pick.value = NMT.state.study;
  };

  NMT.showStudy = async function () {
    if (!NMT.state.study) return;
    if (!NMT.study.data || NMT.study.data.name !== NMT.state.study) {
      NMT.study.data = await NMT.api(`/api/studies/${encodeURIComponent(NMT.state.study)}`);
    }
    const sets = NMT.study.data.test_sets;
    const pick = document.getElementById("study-set");
    pick.replaceChildren(...sets.map((t) => NMT.el("option", {value: t.name, text: t.name})));
    if (!sets.some((t) => t.name === NMT.state.sset)) NMT.state.sset = sets.length ? sets[sets.length - 1].name : "";
    pick.value = NMT.state.sset;
    NMT.writeUrl();  // the set shown is in the link even when it was the default
    NMT.study.set = sets.find((t) => t.name === NMT.state.sset) || null;
    NMT.drawStudy();
    if (NMT.state.sbucket) NMT.openBucket(NMT.state.sbucket);
  };

  NMT.drawStudy = function () {
    const ts = NMT.study.set, box = document.getElementById("study-plot");
    const note = document.getElementById("study-note");
    if (!ts) { box.replaceChildren(); return; }
    note.textContent = `${NMT.study.data.decoding || ""} ${ts.notes.join("; ")}`.trim();
    const {svg} = NMT, W = 980, H = 420, L = 52, R = 170, T = 24, B = 64;
    const n = ts.buckets.length, bw = (W - L - R) / Math.max(n, 1);
    const x = (i) => L + (i + 0.5) * bw;
    let top = 10;
    ts.buckets.forEach((b) => Object.values(b.rows).forEach((r) => {
      if (r.bleu && r.bleu.high !== null) top = Math.max(top, r.bleu.high);
    }));
    top = Math.ceil(top / 5) * 5;
    const y = (v) => T + (H - T - B) * (1 - v / top);
    const plot = svg("svg", {width: W, height: H, viewBox: `0 0 ${W} ${H}`, class: "study-svg"});
    const axis = svg("g", {class: "axis"});
    for (let v = 0; v <= top; v += 5) {
      axis.append(svg("line", {x1: L, x2: W - R, y1: y(v), y2: y(v), stroke: "#eef0f3"}),
                  svg("text", {x: L - 6, y: y(v) + 4, "text-anchor": "end", text: v}));
    }
    axis.append(svg("text", {x: 14, y: T + (H - T - B) / 2, transform: `rotate(-90 14 ${T + (H - T - B) / 2})`,
                             "text-anchor": "middle", text: "BLEU (95% band)"}),
                svg("text", {x: L + (W - L - R) / 2, y: H - 8, "text-anchor": "middle",
                             text: "source length (words); n = sentences in the bucket"}));
    ts.buckets.forEach((b, i) => {
      axis.append(svg("text", {x: x(i), y: H - B + 16, "text-anchor": "middle", text: b.label}),
                  svg("text", {x: x(i), y: H - B + 30, "text-anchor": "middle", class: "count",
                               text: `n=${b.n}`}));
    });
    plot.append(axis);
    ts.buckets.forEach((b, i) => plot.append(svg("rect", {
      class: "bucket-hit" + (b.label === NMT.state.sbucket ? " active" : ""), x: L + i * bw,
      y: T, width: bw, height: H - T - B, "data-bucket": b.label,
      onclick: () => NMT.openBucket(b.label)}, svg("title", {text: `${b.label} words: list its sentences`}))));
    ts.systems.forEach((name, k) => {
      const color = COLORS[k % COLORS.length];
      const pts = ts.buckets.map((b, i) => [i, b.rows[name]]).filter(([, r]) => r && r.bleu && r.n);
      if (!pts.length) return;
      const hi = pts.map(([i, r]) => `${x(i)},${y(r.bleu.high)}`);
      const lo = pts.slice().reverse().map(([i, r]) => `${x(i)},${y(r.bleu.low)}`);
      plot.append(svg("polygon", {class: "band", fill: color, points: hi.concat(lo).join(" "),
                                  "pointer-events": "none"}));
      plot.append(svg("polyline", {class: "study-line", stroke: color, "data-system": name,
                                   "pointer-events": "none",
                                   points: pts.map(([i, r]) => `${x(i)},${y(r.bleu.score)}`).join(" ")}));
      pts.forEach(([i, r]) => plot.append(svg("circle", {cx: x(i), cy: y(r.bleu.score), r: 3, fill: color,
        "pointer-events": "none"})));
      const ly = T + 14 + k * 18;
      plot.append(svg("line", {x1: W - R + 14, x2: W - R + 36, y1: ly - 4, y2: ly - 4, stroke: color,
                               "stroke-width": 3}),
                  svg("text", {x: W - R + 42, y: ly, class: "legend", text: name}));
    });
    const words = NMT.words(document.getElementById("src").value);
    const at = ts.buckets.findIndex((b) => words >= b.min_len && (b.max_len === null || words <= b.max_len));
    if (words && at >= 0) {
      const b = ts.buckets[at];
      const f = b.max_len === null ? 0.5 : (words - b.min_len + 0.5) / (b.max_len - b.min_len + 1);
      const xm = L + (at + f) * bw;
      plot.append(svg("line", {class: "input-mark", x1: xm, x2: xm, y1: T, y2: H - B + 4}),
                  svg("text", {class: "input-label", x: xm + 4, y: T + 10, text: `your input: ${words} words`}));
    }
    box.replaceChildren(plot, NMT.studyExports());
  };

  /** List a bucket's sentences (its first 5) with every checked model's output. */
  NMT.openBucket = async function (label) {
    const ts = NMT.study.set, out = document.getElementById("bucket-list");
    NMT.state.sbucket = label; NMT.writeUrl();
    document.querySelectorAll("#study-plot .bucket-hit").forEach((r) =>
      r.classList.toggle("active", r.dataset.bucket === label));
    const b = ts.buckets.find((x) => x.label === label);
    out.replaceChildren(NMT.el("p", {class: "hint", text: `${label} words: loading\u2026`}));
    let ex;
    try {
      ex = await NMT.api(`/api/examples?split=${encodeURIComponent(ts.name)}&bucket=${encodeURIComponent(label)}&limit=5`);
    } catch (e) {
      out.replaceChildren(NMT.el("p", {class: "hint", text: `no sentences: ${e.message}`}));
      return;
    }
    if (!ex.examples.length) {
      out.replaceChildren(NMT.el("p", {class: "hint", text: `${label} words: no sentence in ${ts.name}`}));
      return;
    }
    const models = NMT.checkedModels();
    const body = {lines: ex.examples.map((e) => e.source), references: ex.examples.map((e) => e.reference),
                  models, n_best: 1};
    if (NMT.state.beam) body.beam = NMT.state.beam;
    let res;
    try { res = await NMT.api("/api/translate", body); } catch (e) {
      out.replaceChildren(NMT.el("p", {class: "hint", text: `translate failed: ${e.message}`}));
      return;
    }
    const {el} = NMT;
    const head = el("tr", {}, el("th", {text: "id"}), el("th", {text: "source / reference"}),
      ...res.results.map((r) => el("th", {text: `${r.model} (BLEU)`})));
    const rows = ex.examples.map((e, i) => el("tr", {class: "bucket-row"},
      el("td", {}, String(e.id), el("br"), el("button", {type: "button", class: "use", text: "use",
        onclick: () => NMT.useExample(e)})),
      el("td", {}, e.source, el("br"), el("i", {text: e.reference})),
      ...res.results.map((r) => el("td", {class: "output", "data-model": r.model}, r.lines[i].text,
        el("br"), el("b", {text: NMT.fmt(r.lines[i].bleu, 1)})))));
    const counts = b ? ` (${b.n} in the study; ${b.example_ids ? b.example_ids.length : "?"} served)` : "";
    out.replaceChildren(el("h3", {text: `${ts.name}, ${label} words${counts}: the first ${ex.examples.length} with each loaded model's output`}),
                        el("table", {}, head, ...rows));
  };
})(window.NMT);
