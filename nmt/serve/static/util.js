/* nmt serve page: shared helpers (the NMT namespace), the API client and the URL state.
   Plain JS, no build step: every file adds to window.NMT. */
"use strict";
window.NMT = window.NMT || {};
(function (NMT) {
  /** GET (no body) or POST JSON; resolves to the parsed body, rejects with err.status and
      err.body for any status but 2xx (the API never answers 200 with an error). */
  NMT.api = async function (path, body) {
    const opts = body === undefined ? {} : {
      method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)};
    const r = await fetch(path, opts);
    let data = null;
    try { data = await r.json(); } catch (e) { data = {message: r.statusText}; }
    if (!r.ok) {
      const err = new Error((data && data.message) || r.statusText);
      err.status = r.status; err.body = data;
      throw err;
    }
    return data;
  };

  function build(make, tag, attrs, children) {
    const node = make(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "text") node.textContent = v;
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v === true ? "" : String(v));
    }
    for (const c of children.flat()) {
      if (c === null || c === undefined || c === false) continue;
      node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return node;
  }
  /** An HTML element: el("span", {class: "x", text: "hi", onclick: f}, child...). */
  NMT.el = (tag, attrs, ...children) =>
    build((t) => document.createElement(t), tag, attrs, children);
  /** An SVG element, the same way. */
  NMT.svg = (tag, attrs, ...children) =>
    build((t) => document.createElementNS("http://www.w3.org/2000/svg", t), tag, attrs, children);

  /** A piece as shown: SentencePiece's word mark dropped. */
  NMT.showPiece = (p) => (p === "\u2581" ? "\u2581" : p.replace(/^\u2581/, ""));
  /** Detokenized text of pieces (</s> dropped), the way the target vocabulary joins them. */
  NMT.detok = (pieces) => pieces.filter((p) => p !== "</s>").join("")
    .replace(/\u2581/g, " ").replace(/\s+/g, " ").trim();
  NMT.fmt = (x, d = 2) => (x === null || x === undefined ? "n/a" : Number(x).toFixed(d));
  NMT.words = (s) => s.trim().split(/\s+/).filter(Boolean).length;

  /** The view's state; it lives in the URL's query, so a link reproduces the view. */
  NMT.state = {tab: "translate", src: "", ref: "", models: null, beam: null, nbest: 3,
               alpha: null, prefix: "", set: "", bucket: "", study: "", sset: "", sbucket: "",
               sel: {}, head: {}, view: ""};  // view "ref": the teacher-forced reference
  const MAPS = ["sel", "head"];  // per model: selected hypothesis, shown head
  NMT.readUrl = function () {
    const q = new URLSearchParams(location.search);
    const s = NMT.state;
    for (const key of Object.keys(s)) {
      if (!q.has(key)) continue;
      const v = q.get(key);
      if (key === "models") s.models = v ? v.split(",") : [];
      else if (MAPS.includes(key)) {
        s[key] = {};
        for (const part of v.split(",").filter(Boolean)) {
          const [m, n] = part.split(":");
          s[key][m] = Number(n);
        }
      } else if (["beam", "nbest", "alpha"].includes(key)) s[key] = v === "" ? null : Number(v);
      else s[key] = v;
    }
  };
  NMT.writeUrl = function () {
    const q = new URLSearchParams();
    for (const [key, v] of Object.entries(NMT.state)) {
      if (v === null || v === "" || v === undefined) continue;
      if (key === "models") q.set(key, v.join(","));
      else if (MAPS.includes(key)) {
        const parts = Object.entries(v).filter(([, n]) => n).map(([m, n]) => `${m}:${n}`);
        if (parts.length) q.set(key, parts.join(","));
      } else q.set(key, String(v));
    }
    history.replaceState(null, "", "?" + q.toString());
  };

  NMT.status = function (text, isError) {
    const node = document.getElementById("status");
    node.textContent = text || "";
    node.classList.toggle("error", Boolean(isError));
  };
})(window.NMT);
