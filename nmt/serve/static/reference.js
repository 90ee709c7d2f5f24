/* nmt serve page: the reference word alignment of a test-set line
   (POST /api/reference_alignment). When the source is a line the statistical aligner
   covered (eflomal, grow-diag-final-and: a reference, not gold), each pane with attention
   offers the "reference" view: its weights read by teacher forcing the reference
   translation, the reference links outlined on the heatmap, the shown head's own links
   as dots, and every head's precision, recall and AER for this sentence. */
"use strict";
(function (NMT) {
  const $ = (id) => document.getElementById(id);
  NMT.reference = null;  // the last answer's alignment (null: none for this line)

  /** Ask for the reference alignment of the translated line and give each pane its part. */
  NMT.loadReference = async function (src, ref, models) {
    const panes = NMT.panes, note = $("reference-note");
    NMT.reference = null;
    note.textContent = "";
    let res;
    try {
      res = await NMT.api("/api/reference_alignment",
                          {line: src, reference: ref || null, models});
    } catch (e) {
      return;  // a server without the route, or a line it refuses: the page is as before
    }
    if (panes !== NMT.panes) return;  // a later translation is shown
    NMT.reference = res.alignment;
    note.textContent = res.note || "";
    if (!res.alignment) return;
    const byModel = Object.fromEntries(res.alignment.models.map((m) => [m.model, m]));
    panes.forEach((p) => { p.ref = byModel[p.id] || null; p.rerender(); });
  };

  /** The agreement row of the head a pane shows (head 0: the mean, or the only head). */
  NMT.shownAgreement = function (pane, view) {
    const rows = view.agreement;
    if (rows.length === 1) return rows[0];
    return rows.find((r) => r.head === (pane.head ? String(pane.head) : "mean"));
  };

  /** What the heatmap outlines: the reference links and the shown head's links, each
      with the word of every source and target piece (drawn as the block of its cells). */
  NMT.referenceMarks = (pane, view) => ({
    ref: NMT.reference.links, own: NMT.shownAgreement(pane, view).links,
    srcWord: view.src_word, tgtWord: view.tgt_word});

  /** Where the outline comes from, and what the marks mean. */
  NMT.referenceNote = function () {
    const a = NMT.reference;
    return NMT.el("div", {class: "reference-note"},
      `Reference view: weights read by teacher forcing the reference translation of ` +
      `${a.set} line ${a.line + 1}. `, NMT.el("span", {class: "key-ref", text: "outline"}),
      `: its reference word alignment (${a.file}; ${a.aligner}), a statistical reference, ` +
      "not gold. ", NMT.el("span", {class: "key-own", text: "dot"}),
      ": the shown head's link for each target word (its most attended source word; " +
      "green where the reference has it).");
  };

  /** Per head (and the head mean) precision, recall and AER for this sentence; a click
      on a row shows that head. */
  NMT.agreementTable = function (pane, view) {
    const {el} = NMT, shown = NMT.shownAgreement(pane, view), pct = (x) => `${(100 * x).toFixed(1)}%`;
    const head = el("tr", {}, ...["head", "precision", "recall", "AER", "links"].map((t) =>
      el("th", {text: t})));
    const rows = view.agreement.map((r) => el("tr", {
      class: "agree-row" + (r === shown ? " shown" : ""), "data-head": r.head,
      title: "show this head", onclick: () => {
        NMT.state.head[pane.id] = r.head === "mean" || view.agreement.length === 1 ? 0 : Number(r.head);
        NMT.writeUrl(); pane.rerender();
      }},
      el("td", {text: view.agreement.length === 1 ? "attention" : r.head === "mean" ? "mean" : `head ${r.head}`}),
      el("td", {class: "precision", text: pct(r.precision)}),
      el("td", {class: "recall", text: pct(r.recall)}),
      el("td", {class: "aer", text: pct(r.aer)}),
      el("td", {text: `${r.links.length} / ${NMT.reference.links.length} ref`})));
    return el("table", {class: "agreement"}, head, ...rows);
  };

  /** The view buttons: the model's hypothesis, or the teacher-forced reference. */
  NMT.viewBar = function (pane) {
    const {el} = NMT, now = pane.refv ? "ref" : "";
    return el("div", {class: "views"}, "attention on: ",
      [["", "hypothesis"], ["ref", "reference (teacher-forced, aligned)"]].map(([v, text]) =>
        el("button", {type: "button", class: "view" + (v === now ? " active" : ""), "data-view": v || "hyp",
                      text, onclick: () => {
                        NMT.state.view = v; NMT.writeUrl(); NMT.panes.forEach((p) => p.rerender());
                      }})));
  };
})(window.NMT);
