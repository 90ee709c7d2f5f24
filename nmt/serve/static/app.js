/* nmt serve page: start-up and the translate tab. Reads the state from the URL, loads
   the models, test sets and studies, and translates with the checked models into one
   column each (NMT.Pane). */
"use strict";
(function (NMT) {
  const $ = (id) => document.getElementById(id);
  NMT.info = {};

  NMT.checkedModels = () =>
    Array.from(document.querySelectorAll("#model-boxes input:checked")).map((i) => i.value);

  /** Force the prefix made of these target pieces, and re-decode every column. */
  NMT.forcePrefix = function (pieces) {
    NMT.state.prefix = NMT.detok(pieces);
    NMT.state.sel = {};
    NMT.translate();
  };

  NMT.useExample = function (e) {
    $("src").value = e.source;
    $("ref").value = e.reference;
    NMT.state.prefix = "";
    NMT.showTab("translate");
    NMT.translate();
  };

  function readInputs() {
    const s = NMT.state;
    s.src = $("src").value.replace(/\s+/g, " ").trim();
    s.ref = $("ref").value.trim();
    s.models = NMT.checkedModels();
    s.beam = $("beam").value ? Number($("beam").value) : null;
    s.nbest = $("nbest").value ? Number($("nbest").value) : 1;
    if (s.beam && s.nbest > s.beam) { s.nbest = s.beam; $("nbest").value = s.nbest; }
    s.alpha = $("alpha").value === "" ? null : Number($("alpha").value);
  }

  NMT.translate = async function () {
    readInputs();
    const s = NMT.state;
    NMT.writeUrl();
    if (!s.src) { NMT.status("type a source sentence or pick an example"); return; }
    if (!s.models.length) { NMT.status("check at least one model", true); return; }
    const body = {lines: [s.src], models: s.models, n_best: s.nbest, top_k: 3};
    if (s.beam) body.beam = s.beam;
    if (s.alpha !== null) body.alpha = s.alpha;
    if (s.prefix) body.prefix = s.prefix;
    if (s.ref) body.references = [s.ref];
    NMT.status("translating\u2026");
    $("go").disabled = true;
    let res;
    try {
      res = await NMT.api("/api/translate", body);
    } catch (e) {
      NMT.status(`${e.status || ""} ${e.message}`, true);
      return;
    } finally {
      $("go").disabled = false;
    }
    NMT.lastAnswer = res;
    NMT.panes = res.results.map((r) => new NMT.Pane(NMT.info[r.model], r, r.lines[0]));
    $("columns").replaceChildren(...NMT.panes.map((p) => p.node));
    $("prefix-bar").hidden = !s.prefix;
    $("prefix").textContent = s.prefix;
    NMT.status(`${res.results.length} model${res.results.length === 1 ? "" : "s"}, ` +
               `${NMT.fmt(res.time_ms, 0)} ms` + (res.bleu_signature && s.ref ? `; sentence BLEU ${res.bleu_signature}` : ""));
    await NMT.loadReference(s.src, s.ref, s.models);  // a test-set line's reference alignment
    document.body.dataset.translated = String(Date.now());
    if (NMT.study.set) NMT.drawStudy();
  };

  NMT.showTab = function (name) {
    NMT.state.tab = name;
    NMT.writeUrl();
    for (const t of ["translate", "study"]) {
      $(`${t}-tab`).hidden = t !== name;
      $(`tab-${t}`).classList.toggle("active", t === name);
    }
    if (name === "study") NMT.showStudy().catch((e) => NMT.status(e.message, true));
  };

  let examplesOffset = 0, examplesAsked = 0, setNotes = [];
  async function listExamples(offset) {
    const s = NMT.state, list = $("examples"), note = $("examples-note"), asked = ++examplesAsked;
    examplesOffset = offset;
    note.textContent = "";
    if (!s.set) {  // no test set could be read: say why (the server's notes), not nothing
      list.replaceChildren();
      if (setNotes.length) note.textContent = `no examples: ${setNotes[0]}`;
      return;
    }
    const q = `split=${encodeURIComponent(s.set)}&limit=10&offset=${offset}` +
      (s.bucket ? `&bucket=${encodeURIComponent(s.bucket)}` : "");
    try {
      const ex = await NMT.api(`/api/examples?${q}`);
      if (asked !== examplesAsked) return;  // a later choice is on its way
      list.dataset.set = s.set; list.dataset.bucket = s.bucket;
      // the line number is a span, not the list's marker: a marker's box is fixed and
      // cut 4-digit numbers of the joined set ("1522." showed as "22.")
      list.replaceChildren(...ex.examples.map((e) => NMT.el("li", {
        title: e.reference, "data-id": e.id, onclick: () => NMT.useExample(e)},
        NMT.el("span", {class: "num", text: `${e.id + 1}.`}), ` (${e.words}) ${e.source}`)));
      // notes go beside the list: as items they would be numbered like sentences
      if (!ex.examples.length) note.textContent = "no sentence of this length in this set";
    } catch (e) {
      if (asked !== examplesAsked) return;
      list.replaceChildren();
      note.textContent = `no examples: ${e.message}`;
    }
  }

  function fillBuckets(sets) {
    const s = NMT.state, set = sets.find((x) => x.name === s.set);
    $("bucket").replaceChildren(NMT.el("option", {value: "", text: "any length"}),
      ...(set ? set.buckets : []).map((b) => NMT.el("option", {value: b.label,
        text: `${b.label} words (${b.n})`, disabled: b.n === 0})));
    $("bucket").value = s.bucket;
  }

  async function init() {
    NMT.readUrl();
    const s = NMT.state;
    const [models, sets] = await Promise.all([NMT.api("/api/models"),
                                              NMT.api("/api/testsets").catch(() => ({sets: []}))]);
    models.models.forEach((m) => { NMT.info[m.id] = m; });
    setNotes = sets.notes || [];
    const chosen = s.models && s.models.length ? s.models : models.default;
    $("model-boxes").replaceChildren(...models.models.map((m) => NMT.el("label", {
      title: `${m.direction}, ${m.attention}, ${m.parameters.toLocaleString()} parameters`},
      NMT.el("input", {type: "checkbox", value: m.id, checked: chosen.includes(m.id),
                       onchange: () => { if (NMT.state.src) NMT.translate(); }}),
      ` ${m.id}`)));
    $("src").value = s.src;
    $("ref").value = s.ref;
    if (s.beam) $("beam").value = s.beam;
    if (s.nbest) $("nbest").value = s.nbest;
    if (s.alpha !== null) $("alpha").value = s.alpha;
    $("set").replaceChildren(...sets.sets.map((x) => NMT.el("option", {value: x.name,
      text: `${x.name} (${x.n})`})));
    if (!sets.sets.some((x) => x.name === s.set)) {
      const joined = sets.sets.find((x) => x.name.endsWith("_joined"));
      s.set = joined ? joined.name : (sets.sets[0] ? sets.sets[0].name : "");
    }
    $("set").value = s.set;
    fillBuckets(sets.sets);
    $("set").addEventListener("change", () => {
      s.set = $("set").value; s.bucket = ""; fillBuckets(sets.sets); NMT.writeUrl(); listExamples(0);
    });
    $("bucket").addEventListener("change", () => { s.bucket = $("bucket").value; NMT.writeUrl(); listExamples(0); });
    $("more-examples").addEventListener("click", () => listExamples(examplesOffset + 10));
    $("save-html").addEventListener("click", () => NMT.saveHtml());
    $("go").addEventListener("click", () => { NMT.state.sel = {}; NMT.translate(); });
    $("src").addEventListener("keydown", (ev) => {
      if (ev.key === "Enter" && !ev.shiftKey) { ev.preventDefault(); NMT.state.prefix = ""; NMT.translate(); }
    });
    $("clear-prefix").addEventListener("click", () => { NMT.state.prefix = ""; NMT.translate(); });
    document.querySelectorAll("button.tab").forEach((b) =>
      b.addEventListener("click", () => NMT.showTab(b.dataset.tab)));
    $("study").addEventListener("change", () => {
      s.study = $("study").value; s.sbucket = ""; NMT.writeUrl(); NMT.showStudy();
    });
    $("study-set").addEventListener("change", () => {  // the URL holds the study's test set
      s.sset = $("study-set").value; s.sbucket = ""; NMT.writeUrl();
      $("bucket-list").replaceChildren(); NMT.showStudy();
    });
    listExamples(0);
    await NMT.loadStudies().catch((e) => NMT.status(e.message, true));
    NMT.showTab(s.tab === "study" ? "study" : "translate");
    if (s.src) await NMT.translate();
    document.body.dataset.ready = "1";
  }
  document.addEventListener("DOMContentLoaded", () => init().catch((e) => NMT.status(e.message, true)));
})(window.NMT);
