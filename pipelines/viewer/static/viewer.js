// bookindex viewer: the corpus, a document's heading tree, a page with its nodes' boxes, and
// questions with their evidence. Plain JavaScript, no library, nothing fetched from elsewhere.
// The bearer token is asked once, kept in sessionStorage (this tab) and sent in the
// Authorization header of every request for data; page images are fetched the same way and
// shown through blob: URLs, so the token never appears in an address.
"use strict";

const TOKEN_KEY = "bookindex.token";
const KINDS = ["section", "text", "list", "table", "image", "caption", "formula", "furniture"];
const KIND_NAMES = {
  section: "heading",
  text: "paragraph",
  list: "list item",
  table: "table",
  image: "figure",
  caption: "caption",
  formula: "formula",
  furniture: "running head / footer (dropped as furniture)",
};
const WIDTHS = [300, 600, 800, 1000, 1200, 1600, 2000, 2400];
const THUMB_WIDTH = 300;

let token = sessionStorage.getItem(TOKEN_KEY) || "";
let corpusCache = null;
const docCache = new Map();
const imageCache = new Map(); // "doc/page/width" -> blob: URL
const pageCache = new Map(); // "doc/page" -> the page's nodes
const hiddenKinds = new Set();

let routeSerial = 0; // the route shown: a view whose data comes after the next route is dropped

class Unauthorized extends Error {}

// ---- requests --------------------------------------------------------------------------------
function headers(extra) {
  const out = Object.assign({}, extra || {});
  if (token) out.Authorization = "Bearer " + token;
  return out;
}

async function request(path, options) {
  const opts = Object.assign({ cache: "no-store" }, options || {});
  opts.headers = headers(opts.headers);
  const sent = token;
  const response = await fetch(path, opts);
  if (response.status === 401) {
    forgetToken();
    showLogin(sent ? "The server refused this token: enter it again." : "");
    throw new Unauthorized("401");
  }
  return response;
}

async function getJSON(path) {
  const response = await request(path);
  const body = await response.json().catch(() => ({}));
  if (!response.ok) {
    throw new Error(problem(body, response.status));
  }
  return body;
}

function problem(body, status) {
  if (body && typeof body.error === "string") return body.error;
  if (body && typeof body.detail === "string") return body.detail;
  if (body && Array.isArray(body.detail) && body.detail.length) return body.detail[0].msg;
  return "the server answered " + status;
}

async function pageImage(docId, page, width) {
  const key = docId + "/" + page + "/" + width;
  if (imageCache.has(key)) return imageCache.get(key);
  const path = "/viewer/api/docs/" + encodeURIComponent(docId) + "/pages/" + page +
    "/image?width=" + width;
  const response = await request(path, { cache: "default" });
  if (!response.ok) {
    const body = await response.json().catch(() => ({}));
    throw new Error(problem(body, response.status));
  }
  const url = URL.createObjectURL(await response.blob());
  imageCache.set(key, url);
  if (imageCache.size > 300) {
    const [oldest, old] = imageCache.entries().next().value;
    imageCache.delete(oldest);
    URL.revokeObjectURL(old);
  }
  return url;
}

// ---- the token -------------------------------------------------------------------------------
function forgetToken() {
  token = "";
  sessionStorage.removeItem(TOKEN_KEY);
  corpusCache = null;
  docCache.clear();
  pageCache.clear();
}

async function pageData(docId, page) {
  const key = docId + "/" + page;
  if (!pageCache.has(key)) {
    const found = await getJSON("/viewer/api/docs/" + encodeURIComponent(docId) + "/pages/" + page);
    pageCache.set(key, found);
    if (pageCache.size > 200) pageCache.delete(pageCache.keys().next().value);
  }
  return pageCache.get(key);
}

function showLogin(message) {
  document.getElementById("view").replaceChildren();
  document.getElementById("login").hidden = false;
  document.getElementById("logout").hidden = true;
  document.getElementById("login-message").textContent = message || "";
  document.getElementById("token-input").focus();
}

async function login(event) {
  event.preventDefault();
  const input = document.getElementById("token-input");
  token = input.value.trim();
  input.value = "";
  if (!token) {
    showLogin("Enter the token.");
    return;
  }
  sessionStorage.setItem(TOKEN_KEY, token);
  await start();
}

async function start() {
  try {
    corpusCache = await getJSON("/viewer/api/corpus");
  } catch (error) {
    if (!(error instanceof Unauthorized)) setStatus(error.message, true);
    return;
  }
  document.getElementById("login").hidden = true;
  document.getElementById("logout").hidden = !token;
  route();
}

// ---- small DOM helpers -----------------------------------------------------------------------
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key.startsWith("data-")) node.setAttribute(key, String(value));
    else if (key in node) node[key] = value;
    else node.setAttribute(key, String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function setStatus(text, isError) {
  const status = document.getElementById("status");
  status.textContent = text || "";
  status.className = isError ? "error" : "";
}

function view(...children) {
  const root = document.getElementById("view");
  root.replaceChildren(...children);
  return root;
}

function docLink(docId) {
  return "#/doc/" + encodeURIComponent(docId);
}

function pageLink(docId, page, nodeId) {
  let hash = docLink(docId) + "/page/" + page;
  if (nodeId) hash += "/node/" + encodeURIComponent(nodeId);
  return hash;
}

function coordinates(node) {
  return "sec " + node.sec_id + " ¶" + node.para_idx + " · p." + node.page +
    (node.page_end && node.page_end !== node.page ? "–" + node.page_end : "");
}

function boxText(bbox) {
  return bbox ? bbox.map((v) => v.toFixed(1)).join(", ") + " pt" : "no box";
}

// ---- routing ---------------------------------------------------------------------------------
function route() {
  if (!corpusCache) return;
  routeSerial += 1;
  setStatus("");
  hideTip();
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  const task = (() => {
    if (parts[0] === "doc" && parts[1]) {
      if (parts[2] === "page") return showPage(parts[1], Number(parts[3]), parts[5] || null);
      if (parts[2] === "section") return showDocument(parts[1], Number(parts[3]));
      return showDocument(parts[1], null);
    }
    if (parts[0] === "ask") return showAsk();
    return showCorpus();
  })();
  Promise.resolve(task).catch((error) => {
    if (!(error instanceof Unauthorized)) setStatus(error.message, true);
  });
}

// ---- corpus ----------------------------------------------------------------------------------
async function showCorpus() {
  const mine = routeSerial;
  const corpus = (corpusCache = await getJSON("/viewer/api/corpus"));
  if (mine !== routeSerial) return;
  const rows = corpus.documents.map((d) =>
    el("tr", { "data-doc-id": d.doc_id, class: "status-" + d.status },
      el("td", {}, d.status === "failed" || d.passage
        ? el("span", { text: d.name })
        : el("a", { href: docLink(d.doc_id), class: "doc-link", text: d.name })),
      el("td", { text: d.title }),
      el("td", { class: "status", text: d.status + (d.error ? ": " + d.error : "") }),
      el("td", { class: "num", text: d.n_pages }),
      el("td", { class: "num", text: d.ocr_pages }),
      el("td", { class: "num", text: d.n_nodes }),
      el("td", { class: "num", text: d.n_sections }),
      el("td", { class: "build", title: d.build, text: d.build_id || "none" }),
      el("td", { text: d.indexed_at })));
  const failures = corpus.failures.length
    ? el("table", { id: "failures" },
      el("thead", {}, el("tr", {}, ["File", "Stage", "Error", "When"].map((h) => el("th", { text: h })))),
      el("tbody", {}, corpus.failures.map((f) =>
        el("tr", {}, el("td", { text: f.uri }), el("td", { text: f.stage }),
          el("td", { text: f.error }), el("td", { text: f.failed_at })))))
    : el("p", { id: "failures", text: "No failure rows." });
  view(
    el("h1", { text: "Documents (" + corpus.documents.length + ")" }),
    el("table", { id: "documents" },
      el("thead", {}, el("tr", {}, ["Document", "Title", "Status", "Pages", "OCR pages", "Nodes",
        "Sections", "Build", "Indexed"].map((h) => el("th", { text: h })))),
      el("tbody", {}, rows)),
    el("h2", { text: "Failure rows (" + corpus.failures.length + ")" }),
    failures);
}

// ---- a document ------------------------------------------------------------------------------
async function documentData(docId) {
  if (!docCache.has(docId)) {
    docCache.set(docId, await getJSON("/viewer/api/docs/" + encodeURIComponent(docId)));
  }
  return docCache.get(docId);
}

function nestTree(entries) {
  // The stored TOC is flat, in document order, with levels (0: the document's title).
  const root = { entry: null, children: [] };
  const stack = [{ level: -1, item: root }];
  for (const entry of entries) {
    const item = { entry, children: [] };
    while (stack.length > 1 && stack[stack.length - 1].level >= entry.level) stack.pop();
    stack[stack.length - 1].item.children.push(item);
    stack.push({ level: entry.level, item });
  }
  return root.children;
}

function treeList(docId, items, collapseBelow) {
  return el("ul", {}, items.map((item) => {
    const e = item.entry;
    const li = el("li", {
      class: "toc-entry" + (item.children.length && e.level >= collapseBelow ? " collapsed" : ""),
      "data-sec-id": e.sec_id, "data-level": e.level, "data-page": e.page,
      "data-node-id": e.node_id,
    });
    const toggle = item.children.length
      ? el("button", { type: "button", class: "toggle", title: "open or close",
        onclick: () => li.classList.toggle("collapsed") })
      : el("span", { class: "toggle-space" });
    li.append(el("div", { class: "heading" },
      toggle,
      el("a", { class: "heading-title", href: pageLink(docId, e.page, e.node_id),
        title: "open page " + e.page + " with this heading", text: e.title || "(untitled)" }),
      el("span", { class: "meta", text: "L" + e.level + " · p." + e.page }),
      el("a", { class: "paragraphs", href: docLink(docId) + "/section/" + e.sec_id,
        title: "the paragraphs under this heading", text: "¶ " + e.n_paragraphs })));
    if (item.children.length) li.append(treeList(docId, item.children, collapseBelow));
    return li;
  }));
}

async function showDocument(docId, secId) {
  const mine = routeSerial;
  const doc = await documentData(docId);
  if (mine !== routeSerial) return;
  const collapseBelow = doc.tree.length > 150 ? 2 : 99;
  const kinds = Object.entries(doc.kinds).map(([k, n]) => (KIND_NAMES[k] || k) + " " + n).join(", ");
  const panel = el("section", { id: "panel" });
  view(
    el("h1", { text: doc.title || doc.name }),
    el("p", { class: "meta" }, doc.name + " · " + doc.n_pages + " pages · " + doc.n_nodes +
      " nodes (" + kinds + ") · ", el("a", { href: pageLink(docId, 1), text: "page 1" })),
    el("div", { class: "columns" },
      el("nav", { id: "tree", "data-doc-id": docId }, el("h2", { text: "Headings (" + doc.tree.length + ")" }),
        treeList(docId, nestTree(doc.tree), collapseBelow)),
      panel));
  if (secId !== null && !Number.isNaN(secId)) await showSection(docId, secId, panel);
  else showFigures(doc, panel);
}

function nodeCard(docId, node) {
  return el("article", { class: "node kind-" + node.kind, "data-node-id": node.node_id },
    el("header", {},
      el("span", { class: "badge kind-" + node.kind, text: KIND_NAMES[node.kind] || node.kind }),
      " ", el("a", { href: pageLink(docId, node.page, node.node_id), text: coordinates(node) })),
    el("p", { class: "text", text: node.text }));
}

async function showSection(docId, secId, panel) {
  const section = await getJSON("/viewer/api/docs/" + encodeURIComponent(docId) +
    "/sections/" + secId);
  panel.replaceChildren(
    el("h2", { id: "section-title", text: section.heading.title || section.heading.text }),
    el("p", { class: "meta" }, coordinates(section.heading) + " · ",
      el("a", { href: docLink(docId), text: "tables and figures" })),
    el("div", { id: "section-nodes" }, section.nodes.map((n) => nodeCard(docId, n))));
}

function showFigures(doc, panel) {
  panel.replaceChildren(
    el("h2", { text: "Tables and figures (" + doc.figures.length + ")" }),
    el("div", { id: "figures" }, doc.figures.map((f) => {
      const card = nodeCard(doc.doc_id, f);
      if (f.caption && !f.text.startsWith(f.caption)) {
        card.append(el("p", { class: "caption", text: f.caption }));
      }
      if (f.summary) card.append(el("p", { class: "summary", text: "Description: " + f.summary }));
      return card;
    })));
}

// ---- a page ----------------------------------------------------------------------------------
function imageWidth(cssWidth) {
  const wanted = cssWidth * (window.devicePixelRatio || 1);
  return WIDTHS.find((w) => w >= wanted) || WIDTHS[WIDTHS.length - 1];
}

function placeBoxes(stage, page) {
  // Boxes are stored in PDF points (origin top left); the image shows the page at
  // (its width in pixels on screen) / (the page's width in points) pixels per point.
  const img = stage.querySelector("img.page-image");
  const scale = img.clientWidth / page.width;
  stage.dataset.scale = String(scale);
  for (const box of stage.querySelectorAll(".box")) {
    const [x0, y0, x1, y1] = JSON.parse(box.dataset.bbox);
    box.style.left = x0 * scale + "px";
    box.style.top = y0 * scale + "px";
    box.style.width = Math.max(1, (x1 - x0) * scale) + "px";
    box.style.height = Math.max(1, (y1 - y0) * scale) + "px";
  }
}

function boxFor(node, docName, onOpen) {
  const box = el("div", {
    class: "box kind-" + node.kind, "data-node-id": node.node_id || "",
    "data-kind": node.kind, "data-bbox": JSON.stringify(node.bbox),
  });
  box.addEventListener("mousemove", (event) => showTip(event, node, docName));
  box.addEventListener("mouseleave", hideTip);
  if (onOpen) box.addEventListener("click", () => onOpen(node));
  if (hiddenKinds.has(node.kind)) box.classList.add("hidden-kind");
  return box;
}

function showTip(event, node, docName) {
  const tip = document.getElementById("tip");
  const where = node.kind === "furniture"
    ? "page " + node.page + " · " + node.role + " (not a node: dropped as page furniture)"
    : docName + " · " + coordinates(node);
  tip.replaceChildren(
    el("strong", { text: KIND_NAMES[node.kind] || node.kind }),
    el("div", { text: where }),
    el("div", { class: "meta", text: "box " + boxText(node.bbox) }),
    el("div", { class: "snippet", text: (node.text || "").slice(0, 200) }));
  tip.hidden = false;
  tip.style.left = Math.min(event.clientX + 14, window.innerWidth - 340) + "px";
  tip.style.top = event.clientY + 14 + "px";
}

function hideTip() {
  const tip = document.getElementById("tip");
  if (tip) tip.hidden = true;
}

async function showPage(docId, pageNo, nodeId) {
  const base = "/viewer/api/docs/" + encodeURIComponent(docId) + "/pages/" + pageNo;
  const mine = routeSerial;
  const page = await pageData(docId, pageNo);
  if (mine !== routeSerial) return;
  const details = el("section", { id: "node-details" },
    el("p", { class: "meta", text: "Point at a box to see its coordinates; click it to open the node." }));
  const stage = el("div", { class: "page-stage", id: "page-stage", "data-doc-id": docId, "data-page": pageNo });
  const legend = el("div", { id: "legend" }, KINDS.map((kind) => {
    const input = el("input", { type: "checkbox", checked: !hiddenKinds.has(kind),
      onchange: () => {
        if (input.checked) hiddenKinds.delete(kind); else hiddenKinds.add(kind);
        for (const b of stage.querySelectorAll(".box.kind-" + kind)) {
          b.classList.toggle("hidden-kind", !input.checked);
        }
      } });
    return el("label", { class: "legend-item" }, input,
      el("span", { class: "swatch kind-" + kind }), KIND_NAMES[kind]);
  }));
  const nav = el("div", { class: "page-nav" },
    el("a", { href: docLink(docId), text: "← " + (page.title || page.name) }),
    " · ",
    pageNo > 1 ? el("a", { id: "prev-page", href: pageLink(docId, pageNo - 1), text: "‹ previous" }) : "",
    el("span", { id: "page-number", text: " page " + pageNo + " of " + page.n_pages + " " }),
    pageNo < page.n_pages ? el("a", { id: "next-page", href: pageLink(docId, pageNo + 1), text: "next ›" }) : "");
  const open = (node) => openNode(docId, page, node, details, stage);
  const furnitureNote = el("p", { id: "furniture-note", class: "meta", text: "Reading the running heads and footers…" });
  view(
    nav,
    legend,
    el("div", { class: "columns" },
      el("div", { class: "page-column" }, stage),
      el("aside", { id: "page-side" },
        details,
        el("h2", { text: "Nodes on this page (" + page.nodes.length + ")" }),
        el("ol", { id: "page-nodes" }, page.nodes.map((n) =>
          el("li", { "data-node-id": n.node_id },
            el("a", { href: pageLink(docId, pageNo, n.node_id), text: (KIND_NAMES[n.kind] || n.kind) + " · " + coordinates(n) }),
            " ", (n.title || n.text).slice(0, 80)))),
        page.continued.length ? el("h2", { text: "Running on from earlier pages" }) : "",
        page.continued.length ? el("ul", { id: "continued" }, page.continued.map((n) =>
          el("li", {}, el("a", { href: pageLink(docId, n.page, n.node_id), text: (KIND_NAMES[n.kind] || n.kind) + " · " + coordinates(n) })))) : "",
        furnitureNote)));
  const width = imageWidth(stage.clientWidth || 800);
  const img = el("img", { class: "page-image", alt: "page " + pageNo });
  stage.append(img);
  for (const node of page.nodes) {
    if (node.bbox) stage.append(boxFor(node, page.name, open));
  }
  img.addEventListener("load", () => {
    placeBoxes(stage, page);
    stage.classList.add("ready");
    const target = nodeId && page.nodes.find((n) => n.node_id === nodeId);
    if (target) openNode(docId, page, target, details, stage, true);
  });
  window.onresize = () => placeBoxes(stage, page);
  img.src = await pageImage(docId, pageNo, width);
  if (nodeId && !page.nodes.some((n) => n.node_id === nodeId)) {
    setStatus("That node does not start on this page.", true);
  }
  loadFurniture(base, page, stage, furnitureNote);
}

async function loadFurniture(base, page, stage, note) {
  try {
    const found = await getJSON(base + "/furniture");
    for (const f of found.furniture) {
      const node = { kind: "furniture", role: f.kind, bbox: f.bbox, text: f.text, page: page.page };
      stage.append(boxFor(node, page.name, null));
    }
    if (stage.classList.contains("ready")) placeBoxes(stage, page);
    note.textContent = found.furniture.length
      ? found.furniture.length + " running head(s) or footer(s) dropped as furniture (recomputed from the PDF)."
      : "No running head or footer on this page.";
  } catch (error) {
    if (!(error instanceof Unauthorized)) note.textContent = "Running heads: " + error.message;
  }
}

function openNode(docId, page, node, details, stage, scroll) {
  for (const b of stage.querySelectorAll(".box.highlight")) b.classList.remove("highlight");
  const box = stage.querySelector('.box[data-node-id="' + CSS.escape(node.node_id) + '"]');
  if (box) {
    box.classList.add("highlight");
    if (scroll) box.scrollIntoView({ block: "center" });
  }
  details.replaceChildren(
    el("h2", { text: (KIND_NAMES[node.kind] || node.kind) + " · " + coordinates(node) }),
    el("p", { class: "meta", text: page.name + " · box " + boxText(node.bbox) + " · node " + node.node_id }),
    el("p", {}, el("a", { href: docLink(docId) + "/section/" + node.sec_id, text: "open section " + node.sec_id })),
    el("p", { class: "text", id: "node-text", text: node.text }));
}

// ---- ask -------------------------------------------------------------------------------------
function showAsk() {
  const corpus = corpusCache;
  const methods = el("select", { id: "method" },
    el("option", { value: "*", text: "all methods side by side" }),
    corpus.methods.map((m) => el("option", { value: m.name, text: m.name + ": " + m.description,
      selected: m.name === "auto" })));
  const docs = el("select", { id: "ask-doc" },
    el("option", { value: "", text: "the whole index" }),
    corpus.documents.filter((d) => d.status !== "failed").map((d) =>
      el("option", { value: d.doc_id, text: d.name })));
  const question = el("textarea", { id: "question", rows: 2, maxLength: 2000,
    placeholder: "How many tables are in Chapter 2?" });
  const k = el("input", { id: "k", type: "number", min: 1, max: 100, value: 5 });
  const answers = el("div", { id: "answers" });
  const form = el("form", { id: "ask", autocomplete: "off" },
    el("label", { for: "question", text: "Question" }), question,
    el("div", { class: "ask-options" },
      el("label", {}, "Method ", methods),
      el("label", {}, "In ", docs),
      el("label", {}, "Evidence units ", k),
      el("button", { type: "submit", id: "ask-button", text: "Ask" })));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const chosen = methods.value === "*" ? corpus.methods.map((m) => m.name) : [methods.value];
    ask(question.value.trim(), chosen, docs.value || null, Number(k.value) || 5, answers)
      .catch((error) => { if (!(error instanceof Unauthorized)) setStatus(error.message, true); });
  });
  view(el("h1", { text: "Ask" }), form, answers);
  question.focus();
}

async function ask(question, methods, doc, k, answers) {
  if (!question) {
    setStatus("Write a question first.", true);
    return;
  }
  setStatus("Asking…");
  answers.replaceChildren();
  answers.classList.toggle("side-by-side", methods.length > 1);
  const columns = methods.map((method) => {
    const column = el("section", { class: "answer", "data-method": method },
      el("h2", { text: method }), el("p", { class: "meta", text: "asking…" }));
    answers.append(column);
    return column;
  });
  await Promise.all(methods.map(async (method, i) => {
    const body = { question, method, k };
    if (doc) body.doc = doc;
    const response = await request("/query", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
    const result = await response.json().catch(() => ({}));
    if (!response.ok) {
      columns[i].replaceChildren(el("h2", { text: method }),
        el("p", { class: "error", text: problem(result, response.status) }));
    } else {
      showAnswer(columns[i], method, result);
    }
    columns[i].dataset.done = "1";
  }));
  setStatus("");
}

function showAnswer(column, asked, result) {
  const routed = result.method !== asked ? " → " + result.method : "";
  const evidence = el("ol", { class: "evidence" }, result.evidence.map((e) => {
    const thumb = el("div", { class: "thumb" });
    const item = el("li", { class: "evidence-item", "data-node-id": e.node_id, "data-doc-id": e.doc_id,
      "data-page": e.page, "data-kind": e.kind },
      el("a", { class: "evidence-link", href: pageLink(e.doc_id, e.page, e.node_id) },
        el("span", { class: "badge kind-" + e.kind, text: KIND_NAMES[e.kind] || e.kind }),
        " " + e.doc + " · " + coordinates(e) + " · score " + Number(e.score).toFixed(3)),
      el("p", { class: "snippet", text: e.text.slice(0, 300) }),
      thumb);
    evidenceThumb(e, thumb);
    return item;
  }));
  column.replaceChildren(
    el("h2", { text: asked + routed + (result.query_class ? " (" + result.query_class + ")" : "") }),
    result.error ? el("p", { class: "error", text: result.error }) : "",
    result.answer !== null && result.answer !== undefined
      ? el("p", { class: "answer-text" }, el("strong", { text: "Answer (" + result.answer_type + "): " }),
        String(result.answer))
      : "",
    el("h3", { text: "Evidence (" + result.evidence.length + ")" }),
    evidence,
    traceTable(result));
}

async function evidenceThumb(e, thumb) {
  // The evidence unit's page, small, with its box: the page's nodes give the box.
  try {
    const page = await pageData(e.doc_id, e.page);
    const node = page.nodes.find((n) => n.node_id === e.node_id);
    const img = el("img", { class: "page-image", alt: "page " + e.page });
    const stage = el("a", { class: "page-stage thumb-stage", href: pageLink(e.doc_id, e.page, e.node_id) }, img);
    if (node && node.bbox) stage.append(boxFor(node, page.name, null));
    img.addEventListener("load", () => {
      placeBoxes(stage, page);
      stage.classList.add("ready");
    });
    thumb.replaceChildren(stage);
    img.src = await pageImage(e.doc_id, e.page, THUMB_WIDTH);
  } catch (error) {
    if (!(error instanceof Unauthorized)) thumb.replaceChildren(el("p", { class: "meta", text: error.message }));
  }
}

function traceTable(result) {
  if (!result.trace || !result.trace.length) {
    return el("p", { class: "meta", text: "Plan: " + (result.plan || []).join(" → ") });
  }
  const rows = result.trace.map((step) => {
    const rest = Object.fromEntries(Object.entries(step).filter(([key]) => !["op", "in", "out", "s"].includes(key)));
    return el("tr", {}, el("td", { text: step.op || step.tool || "" }),
      el("td", { class: "num", text: step.in ?? "" }), el("td", { class: "num", text: step.out ?? "" }),
      el("td", { class: "num", text: step.s ?? "" }),
      el("td", { class: "args", text: Object.keys(rest).length ? JSON.stringify(rest) : "" }));
  });
  return el("details", { class: "trace", open: true },
    el("summary", { text: "Trace (" + result.trace.length + " steps) · plan: " + (result.plan || []).join(" → ") }),
    el("table", {}, el("thead", {}, el("tr", {}, ["step", "in", "out", "s", "details"].map((h) => el("th", { text: h })))),
      el("tbody", {}, rows)));
}

// ---- start -----------------------------------------------------------------------------------
window.addEventListener("hashchange", route);
document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("login").addEventListener("submit", login);
  document.getElementById("logout").addEventListener("click", () => {
    forgetToken();
    showLogin("");
  });
  start();
});
