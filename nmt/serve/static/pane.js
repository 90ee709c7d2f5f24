/* nmt serve page: one column per model, with its translation, scores, source words,
   heatmap (or the fixed-vector panel) and n-best list. Hovering a target word (or a
   source word) lights it in every pane at once: NMT.hoverTarget(k) / NMT.hoverSource(j). */
"use strict";
(function (NMT) {
  NMT.panes = [];
  NMT.hoverTarget = (k) => NMT.panes.forEach((p) => p.target(k));
  NMT.hoverSource = (j) => NMT.panes.forEach((p) => p.source(j));
  NMT.hoverClear = () => NMT.panes.forEach((p) => p.clear());

  const shade = (node, w) => {
    node.style.background = w > 0 ? `rgba(255, 140, 0, ${Math.min(1, w).toFixed(3)})` : "";
  };

  class Pane {
    /** info: GET /api/models entry; result: the model's result; line: its LineResult. */
    constructor(info, result, line) {
      this.info = info; this.result = result; this.line = line;
      this.id = result.model; this.fixed = result.fixed_vector;
      this.node = NMT.el("div", {class: "pane", "data-model": this.id});
      this.render();
      this.node.addEventListener("mouseover", (ev) => this.onOver(ev));
      this.node.addEventListener("mouseleave", () => NMT.hoverClear());
    }

    get hyps() { return this.line.hypotheses; }
    get sel() { return Math.min(NMT.state.sel[this.id] || 0, Math.max(0, this.hyps.length - 1)); }
    get hyp() { return this.hyps[this.sel]; }
    get head() { return NMT.state.head[this.id] || 0; }  // 0: the mean over heads
    /** The teacher-forced reference (NMT.loadReference) when it is the view shown. */
    get refv() { return NMT.state.view === "ref" && this.ref && this.ref.agreement ? this.ref : null; }

    /** The shown weights (T x S): the mean, or head h (from 1) of a multihead model; of
        the hypothesis, or of the reference in the reference view. */
    matrix() {
      const h = this.refv || this.hyp;
      if (!h || !h.attention) return null;
      return this.head && h.heads ? h.heads[this.head - 1] : h.attention;
    }

    argmax(k) {
      const m = this.matrix();
      if (!m || k >= m.length) return null;
      if (!this.head && !this.refv && this.hyp.alignment) return this.hyp.alignment[k];
      let best = 0;
      m[k].forEach((w, j) => { if (w > m[k][best]) best = j; });
      return best;
    }

    render() {
      const {el} = NMT, line = this.line, h = this.hyp, rv = this.refv;
      const kind = this.fixed ? el("span", {class: "badge fixed", text: "fixed vector (attention none)"})
        : el("span", {class: "badge", text: this.info ? this.info.attention +
          (this.info.heads ? ` (${this.info.heads} heads)` : "") : this.result.attention});
      const stats = el("div", {class: "stats"});
      if (h) {
        const ratio = line.len_ratio !== null ? ["length ratio (hyp/ref) ", el("b", {text: NMT.fmt(line.len_ratio)})]
          : ["length ratio (hyp/src words) ", el("b", {text: NMT.fmt(line.src_len_ratio)})];
        stats.append("score ", el("b", {text: NMT.fmt(h.score, 3)}), " \u00b7 ", ...ratio);
        if (h.bleu !== null) {
          stats.append(" \u00b7 BLEU ", el("b", {class: "bleu", text: NMT.fmt(h.bleu, 1)}),
                       " \u00b7 chrF ", el("b", {class: "chrf", text: NMT.fmt(h.chrf, 1)}));
        }
        stats.append(` \u00b7 ${NMT.fmt(this.result.time_ms, 0)} ms`);
      }
      const flags = [];
      if (line.truncated) flags.push("source cut to 400 pieces");
      if (line.unknown) flags.push("no source piece is known to the model");
      // one span per piece (hover lights it), joined without gaps into the detokenized
      // text; where the pieces do not spell the API's text (an unknown piece), the text
      // the reference view's rows are the reference's pieces, none of them forced
      const rows = rv ? rv.tgt_pieces : h ? h.tgt_pieces : [], text = rv ? NMT.reference.reference : h && h.text;
      const forced = rv ? 0 : h ? h.forced : 0, srcPieces = rv ? rv.src_pieces : line.src_pieces;
      const shown = rows.map((p, k) => (p === "</s>" ? "" : p.replace(/^\u2581/, k ? " " : "")));
      this.tgtWords = h && shown.join("") === text ? rows.map((p, k) =>
        el("span", {  // </s>: drawn by CSS
          class: "tgt-word" + (k < forced ? " forced" : "") + (p === "</s>" ? " eos" : ""),
          "data-t": k, title: p === "</s>" ? "end of sentence (</s>)" : null, text: shown[k]})) : [];
      this.srcWords = srcPieces.map((p, j) => el("span", {class: "src-word", "data-s": j,
        text: NMT.showPiece(p)}));
      const srcRow = el("div", {class: "src-words"});
      this.srcWords.forEach((n) => srcRow.append(n, " "));
      this.vis = null;
      let visBox;
      if (!h) {
        visBox = el("div", {class: "hint", text: "(empty input)"});
      } else if (this.fixed) {
        this.vis = NMT.fixedPanel(line.src_pieces, h.tgt_pieces);
        visBox = el("div", {class: "fixed-panel"}, el("div", {class: "fixed-note",
          text: "No attention: this model reads one context vector c, computed once from the " +
                "encoder's final states, at every step. Each target word sees the same c."}),
          this.vis.node);
      } else {
        this.vis = NMT.heatmap(srcPieces, rows, this.matrix(), rv ? NMT.referenceMarks(this, rv) : null);
        visBox = el("div", {class: "heatmap"}, this.vis.node);
      }
      const hh = rv ? rv.heads : h && h.heads;
      const heads = hh ? el("div", {class: "heads"}, "heads: ",
        ["mean", ...hh.map((_, i) => `head ${i + 1}`)].map((name, i) => el("button", {
          type: "button", class: i === this.head ? "active" : "", text: name,
          onclick: () => { NMT.state.head[this.id] = i; NMT.writeUrl(); this.rerender(); }}))) : null;
      this.node.replaceChildren(...[
        el("h2", {}, this.id, kind),
        el("div", {class: "hint", text: this.result.decoding}),
        el("div", {class: "translation"}, rv ? h.text : this.tgtWords.length || !h ? this.tgtWords : text),
        stats, flags.length ? el("div", {class: "flag", text: flags.join("; ")}) : null,
        this.ref && this.ref.agreement && h ? NMT.viewBar(this) : null,
        rv ? el("div", {class: "translation reference"}, el("span", {class: "hint", text: "reference: "}),
                this.tgtWords.length ? this.tgtWords : text) : null,
        srcRow, heads, visBox, rv ? NMT.referenceNote() : null,
        rv ? NMT.agreementTable(this, rv) : null, this.vis ? NMT.paneExports(this) : null,
        this.nbest()].filter(Boolean));
    }

    rerender() { this.render(); }

    /** The n-best list: per hypothesis its tokens with probability bars; a click on a
        token forces the prefix up to it, a click on the rank shows that hypothesis. */
    nbest() {
      const {el} = NMT;
      const list = el("ol", {class: "nbest"});
      this.hyps.forEach((h, i) => {
        const toks = el("div", {class: "toks"});
        h.tgt_pieces.forEach((p, k) => {
          const lp = h.token_logprobs[k], prob = Math.exp(lp);
          const alts = h.top && h.top[k] ? "; top: " + h.top[k].map((a) =>
            `${NMT.showPiece(a.piece)} ${Math.exp(a.logprob).toFixed(2)}`).join(", ") : "";
          toks.append(el("span", {
            class: "tok" + (k < h.forced ? " forced" : ""), "data-k": k, "data-hyp": i,
            title: `p = ${prob.toFixed(3)} (log p ${lp.toFixed(2)})${alts}. Click: force the ` +
                   "prefix up to here and re-decode.",
            onclick: () => NMT.forcePrefix(h.tgt_pieces.slice(0, k + 1))},
            el("span", {class: "bar-box"}, el("b", {class: "bar", style: `height:${Math.max(1, prob * 100).toFixed(1)}%`})),
            el("span", {class: "piece", text: NMT.showPiece(p)})));
        });
        const scores = `score ${NMT.fmt(h.score, 3)}, log P ${NMT.fmt(h.log_prob, 2)}` +
          (h.bleu !== null ? `, BLEU ${NMT.fmt(h.bleu, 1)}` : "") + (h.complete ? "" : ", cut at the length limit");
        list.append(el("li", {class: "hyp" + (i === this.sel ? " selected" : ""), "data-i": i},
          el("span", {class: "rank", text: `#${i + 1}`, title: "show this hypothesis",
                      onclick: () => { NMT.state.sel[this.id] = i; NMT.writeUrl(); this.rerender(); }}),
          el("span", {class: "hscore", text: scores}), " ", el("span", {class: "htext", text: h.text}),
          toks));
      });
      return list;
    }

    onOver(ev) {
      const tok = ev.target.closest(".tok");
      if (tok) {
        // in the reference view the rows are the reference's, not this hypothesis'
        if (Number(tok.dataset.hyp) === this.sel && !this.refv) NMT.hoverTarget(Number(tok.dataset.k));
        return;
      }
      const t = ev.target.closest("[data-t]");
      if (t && this.node.contains(t)) { NMT.hoverTarget(Number(t.dataset.t)); return; }
      const s = ev.target.closest("[data-s]");
      if (s && this.node.contains(s)) NMT.hoverSource(Number(s.dataset.s));
    }

    clear() {
      this.srcWords.forEach((n) => { shade(n, 0); n.classList.remove("argmax", "hl"); });
      this.tgtWords.forEach((n) => { shade(n, 0); n.classList.remove("hl"); });
      this.node.querySelectorAll(".tok.hl").forEach((n) => n.classList.remove("hl"));
      if (this.vis) this.vis.clear();
    }

    /** Light target word k: its row, and the source words shaded by its weights. */
    target(k) {
      this.clear();
      if (!this.vis || k >= (this.refv || this.hyp).tgt_pieces.length) return;
      if (this.tgtWords[k]) this.tgtWords[k].classList.add("hl");
      const tok = this.refv ? null : this.node.querySelector(`.hyp[data-i="${this.sel}"] .tok[data-k="${k}"]`);
      if (tok) tok.classList.add("hl");
      this.vis.target(k);
      if (this.fixed) {  // every source piece reaches step k only through the one vector
        this.srcWords.forEach((n) => shade(n, 0.35));
        return;
      }
      const row = this.matrix()[k], top = Math.max(...row) || 1;
      this.srcWords.forEach((n, j) => shade(n, row[j] / top));
      const a = this.argmax(k);
      if (a !== null && this.srcWords[a]) this.srcWords[a].classList.add("argmax");
    }

    /** Light source word j: its column, and the target words shaded by their weight on it. */
    source(j) {
      this.clear();
      if (!this.vis || j >= this.srcWords.length) return;
      this.srcWords[j].classList.add("hl");
      shade(this.srcWords[j], 0.6);
      this.vis.source(j);
      if (this.fixed) { this.tgtWords.forEach((n) => shade(n, 0.35)); return; }
      const m = this.matrix(), top = Math.max(...m.map((r) => r[j])) || 1;
      this.tgtWords.forEach((n, k) => { if (m[k]) shade(n, m[k][j] / top); });
    }
  }
  NMT.Pane = Pane;
})(window.NMT);
