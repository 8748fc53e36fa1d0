// Urchin viewer. Reads and changes memory only through the daemon's HTTP API; every piece of
// event content is put on the page as text (textContent), never parsed as HTML.
"use strict";

const state = { csrf: null, older: null, newer: null, loading: false, current: null, session: null };
const $ = (id) => document.getElementById(id);
const POLL_MS = 3000;
const PAGE = 50;
const REDACTION = /\[REDACTED:[A-Za-z0-9_.-]+\]/g;

class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

async function api(method, path, body) {
  const headers = { Accept: "application/json" };
  if (method !== "GET") {
    headers["X-Urchin-CSRF"] = state.csrf || "";
    if (body !== undefined) headers["Content-Type"] = "application/json";
  }
  const response = await fetch(path, {
    method, headers, credentials: "same-origin", cache: "no-store",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  let data = null;
  try { data = await response.json(); } catch (_) { data = null; }
  if (!response.ok) throw new ApiError(response.status, (data && data.error) || response.statusText);
  return data;
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "text") node.textContent = value;
    else if (key === "class") node.className = value;
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function notice(text) { $("notice").textContent = text || ""; }

// ---- text rendering: redaction marks and highlights, built from text nodes only ---------------
function terms(query, literal) {
  if (!query) return [];
  if (literal) return [query];
  return query.split(/[^\p{L}\p{N}_]+/u).filter((t) => t.length >= 3);
}

function highlight(text, words) {
  const out = document.createDocumentFragment();
  const lower = text.toLowerCase();
  const needles = words.map((w) => w.toLowerCase()).filter(Boolean);
  let pos = 0;
  while (needles.length && pos < text.length) {
    let best = -1; let len = 0;
    for (const needle of needles) {
      const at = lower.indexOf(needle, pos);
      if (at >= 0 && (best < 0 || at < best)) { best = at; len = needle.length; }
    }
    if (best < 0) break;
    out.append(document.createTextNode(text.slice(pos, best)), el("mark", { text: text.slice(best, best + len) }));
    pos = best + len;
  }
  out.append(document.createTextNode(text.slice(pos)));
  return out;
}

function richText(text, words) {
  const out = document.createDocumentFragment();
  let pos = 0;
  for (const match of text.matchAll(REDACTION)) {
    out.append(highlight(text.slice(pos, match.index), words || []));
    out.append(el("span", { class: "redacted", title: "redacted before it was stored", text: match[0] }));
    pos = match.index + match[0].length;
  }
  out.append(highlight(text.slice(pos), words || []));
  return out;
}

function clip(text, n) { return text.length > n ? text.slice(0, n) + "…" : text; }

// ---- event cards --------------------------------------------------------------------------
// `dated`: the card shows its day too (search results and sessions have no day headings).
function eventCard(ev, words, dated) {
  const stamp = ev.timestamp || ev.updatedAt || "";
  const time = dated ? stamp.slice(0, 10) + " " + stamp.slice(11, 19) : stamp.slice(11, 19);
  if (ev.source === "urchin" && ev.kind === "recall") return auditCard(ev, time);
  const meta = el("div", { class: "meta" },
    el("time", { datetime: ev.timestamp || ev.updatedAt || "", text: time }),
    el("span", { class: "badge", text: ev.source || "?" }),
    ev.kind ? el("span", { text: ev.kind }) : null,
    ev.workspace ? el("span", { text: "· " + ev.workspace }) : null,
    ...(ev.tags || []).map((t) => el("span", { class: "tag", text: t })),
    typeof ev.score === "number" ? el("span", { text: "score " + ev.score.toFixed(3) }) : null,
  );
  const card = el("li", { class: "event", "data-id": ev.id || "", "data-ts": ev.timestamp || "",
    "data-session": ev.session || "" }, meta);
  if (ev.title) card.append(el("p", { class: "title", text: ev.title }));
  const content = el("p", { class: "content" });
  content.append(richText(clip(ev.content || "", 600), words));
  card.append(content);
  const links = el("div", { class: "meta" });
  if (ev.id && !ev.citation) links.append(el("a", { href: "#/event/" + encodeURIComponent(ev.id), text: "Details" }));
  if (ev.session) links.append(el("a", { href: "#/session/" + encodeURIComponent(ev.session), text: "Session " + clip(ev.session, 24) }));
  if (ev.citation) links.append(citationLink(ev));
  card.append(links);
  return card;
}

// ---- recall audit: what the agent was told, and why (ids, reasons, scores; never the text) -------
function auditCard(ev, time) {
  const meta = ev.meta || {};
  const list = (name) => (Array.isArray(meta[name]) ? meta[name] : []);
  const [cited, reasons, scores, what] = ["cited", "reasons", "scores", "what"].map(list);
  const told = el("ol", { class: "told", "aria-label": "Records given to the agent" });
  cited.forEach((id, i) => told.append(toldItem(String(id), reasons[i], scores[i], what[i])));
  if (!cited.length) told.append(el("li", { text: "no records listed" }));
  const when = meta.mode === "session" ? "session start" : meta.mode === "prompt" ? "at a prompt" : "mode " + String(meta.mode);
  return el("li", { class: "event audit", "data-id": ev.id || "", "data-ts": ev.timestamp || "", "data-session": ev.session || "" },
    el("div", { class: "meta" }, el("span", { class: "badge", text: "urchin" }), el("span", { text: "recall" })),
    el("p", { class: "title", text: `Told the agent at ${time} (${when})` }), told,
    el("div", { class: "meta" }, el("a", { href: "#/event/" + encodeURIComponent(ev.id || ""), text: "Details" })));
}

// One cited record: a link to what the viewer can show (an event, a session), its reason and score.
// An event since forgotten says so; a curated memory has no view of its own and stays as text.
function toldItem(id, reason, score, what) {
  const kind = what || "event";
  let target = el("code", { text: id });
  if (kind === "event") target = el("a", { href: "#/event/" + encodeURIComponent(id), text: id });
  else if (kind === "session") target = el("a", { href: "#/session/" + encodeURIComponent(id), text: "session " + id });
  const item = el("li", { "data-cited": id }, target,
    el("span", { class: "reason", text: " — " + (reason === undefined ? "no reason recorded" : String(reason)) }),
    typeof score === "number" && score > 0 ? el("span", { class: "score", text: " · score " + score.toFixed(3) }) : null);
  if (kind === "event") {
    api("GET", "/events/" + encodeURIComponent(id)).catch((err) => {
      if (err.status !== 404) return;
      target.replaceWith(el("code", { text: id }));
      item.append(el("span", { class: "gone", text: " · forgotten since: no longer in the journal" }));
    });
  }
  return item;
}

function citationLink(result) {
  const loc = result.location || {};
  if (loc.path) {
    const heading = (loc.headingPath || []).join(" › ");
    const label = `${loc.path} lines ${loc.startLine}–${loc.endLine}` + (heading ? ` · ${heading}` : "");
    return el("a", { class: "citation", href: `#/file/${encodeURIComponent(loc.path)}?from=${loc.startLine}&to=${loc.endLine}`, text: label });
  }
  const id = (result.citation || "").replace(/^urchin:\/\/events\//, "");
  return el("a", { class: "citation", href: "#/event/" + encodeURIComponent(id), text: result.citation });
}

// Day headings and session headings between cards; `prev` is the event just above.
function withHeadings(events, prev) {
  const out = document.createDocumentFragment();
  for (const ev of events) {
    const day = (ev.timestamp || "").slice(0, 10);
    if (!prev || (prev.timestamp || "").slice(0, 10) !== day) {
      out.append(el("li", { class: "day", role: "presentation" }, el("h3", { text: day })));
      prev = null;
    }
    if (ev.session && (!prev || prev.session !== ev.session)) {
      out.append(el("li", { class: "session-head", role: "presentation" },
        el("a", { href: "#/session/" + encodeURIComponent(ev.session), text: "session " + ev.session })));
    }
    out.append(eventCard(ev));
    prev = ev;
  }
  return out;
}

// ---- timeline -----------------------------------------------------------------------------
const shown = { first: null, last: null };

async function loadOlder() {
  if (state.loading || state.older === undefined) return;
  state.loading = true;
  try {
    const query = state.older ? `?before=${encodeURIComponent(state.older)}&limit=${PAGE}` : `?limit=${PAGE}`;
    const page = await api("GET", "/timeline" + query);
    if (state.newer === null) state.newer = page.newer;
    $("timeline").append(withHeadings(page.events, shown.last));
    if (page.events.length) {
      shown.first = shown.first || page.events[0];
      shown.last = page.events[page.events.length - 1];
    }
    state.older = page.older === null ? undefined : page.older;
    $("more").textContent = state.older === undefined ? "Start of the journal." : "Scroll for older events…";
  } catch (err) {
    $("more").textContent = "Could not load events: " + err.message;
  } finally {
    state.loading = false;
  }
  if (state.older !== undefined && nearBottom()) loadOlder();
}

function nearBottom() {
  const rect = $("more").getBoundingClientRect();
  return !$("view-timeline").hidden && rect.top < window.innerHeight + 400;
}

async function pollNewer() {
  if (document.hidden || state.newer === null || !state.csrf) return;
  try {
    const page = await api("GET", `/timeline?after=${encodeURIComponent(state.newer)}&limit=200`);
    state.newer = page.newer;
    if (page.events.length) place(page.events);
    await refreshEphemeral();
  } catch (err) {
    if (err.status === 401) signedOut();
  }
}

// Newest first by (timestamp, id), as the API pages them.
function newer(a, b) {
  return a.ts !== b.ts ? a.ts > b.ts : a.id > b.id;
}

function cardKey(node) { return { ts: node.getAttribute("data-ts") || "", id: node.getAttribute("data-id") || "" }; }

// Live updates arrive in journal order with any timestamps (an import, a backfill): each goes in its
// place by time. One older than every card shown is left to the next page while older pages remain.
function place(events) {
  const list = $("timeline");
  const cards = Array.from(list.querySelectorAll("li.event"));
  const anchor = cards.find((node) => node.getBoundingClientRect().top >= 0);
  const anchorTop = anchor ? anchor.getBoundingClientRect().top : 0;
  let placed = 0;
  for (const ev of events) {
    if (!ev.id || cards.some((node) => node.getAttribute("data-id") === ev.id)) continue;
    const key = { ts: ev.timestamp || "", id: ev.id };
    const at = cards.findIndex((node) => newer(key, cardKey(node)));
    if (at < 0 && state.older !== undefined) continue;
    const card = eventCard(ev);
    if (at < 0) list.append(card); else list.insertBefore(card, cards[at]);
    cards.splice(at < 0 ? cards.length : at, 0, card);
    placed += 1;
  }
  if (!placed) return;
  headings(list);
  shown.last = cards.length ? { timestamp: cardKey(cards[cards.length - 1]).ts, session: cards[cards.length - 1].getAttribute("data-session") } : null;
  if (anchor && window.scrollY > 0) window.scrollBy(0, anchor.getBoundingClientRect().top - anchorTop); // keep the reader's place
  notice(`${placed} new event${placed === 1 ? "" : "s"}`);
}

// Day and session headings again, from the cards as they now stand.
function headings(list) {
  for (const node of list.querySelectorAll("li.day, li.session-head")) node.remove();
  let prev = null;
  for (const card of Array.from(list.querySelectorAll("li.event"))) {
    const ts = card.getAttribute("data-ts") || ""; const session = card.getAttribute("data-session") || "";
    if (!prev || prev.ts.slice(0, 10) !== ts.slice(0, 10)) {
      list.insertBefore(el("li", { class: "day", role: "presentation" }, el("h3", { text: ts.slice(0, 10) })), card);
      prev = null;
    }
    if (session && (!prev || prev.session !== session)) {
      list.insertBefore(el("li", { class: "session-head", role: "presentation" },
        el("a", { href: "#/session/" + encodeURIComponent(session), text: "session " + session })), card);
    }
    prev = { ts, session };
  }
}

function removeEvents(ids) {
  for (const id of ids) {
    for (const node of document.querySelectorAll("li.event")) {
      if (node.getAttribute("data-id") === id) node.remove();
    }
  }
}

// ---- search -------------------------------------------------------------------------------
async function runSearch(event) {
  event.preventDefault();
  const form = new FormData($("search-form"));
  const query = String(form.get("q") || "").trim();
  const mode = String(form.get("mode"));
  if (!query) return;
  const filters = {};
  for (const name of ["source", "kind", "workspace", "session"]) {
    const value = String(form.get(name) || "").trim();
    if (value) filters[name] = value;
  }
  const hours = String(form.get("hours"));
  const list = $("results");
  list.replaceChildren();
  $("search-status").textContent = "Searching…";
  try {
    let items; let label;
    if (mode === "context") {
      const body = { query, limit: 20, hours: Number(hours) };
      if (filters.source) body.sources = [filters.source];
      if (filters.kind) body.kinds = [filters.kind];
      if (filters.workspace) body.workspace = filters.workspace;
      if (filters.session) body.session = filters.session;
      const result = await api("POST", "/context", body);
      items = result.results || []; label = "hybrid context";
    } else {
      const params = new URLSearchParams({ q: query, hours, limit: "50", ...filters });
      const result = await api("GET", (mode === "semantic" ? "/semantic?" : "/search?") + params);
      items = result.events || []; label = result.mode;
    }
    const words = terms(query, mode === "literal");
    for (const item of items) list.append(eventCard(item, words, true));
    $("search-status").textContent = `${items.length} result${items.length === 1 ? "" : "s"} (${label})`;
  } catch (err) {
    $("search-status").textContent = "Search failed: " + err.message;
  }
}

// ---- session, event and file views --------------------------------------------------------
async function showSession(session) {
  state.session = session;
  $("session-title").textContent = "Session " + session;
  const list = $("conversation");
  list.replaceChildren(el("li", { text: "Loading…" }));
  const params = new URLSearchParams({ session, hours: "876000", limit: "500" });
  const result = await api("GET", "/recent?" + params);
  const events = (result.events || []).slice().reverse(); // a conversation reads oldest first
  list.replaceChildren(...events.map((ev) => {
    const card = eventCard(ev, [], true);
    if (["user", "human", "manual", "shell"].includes(ev.source) || (ev.meta && ev.meta.role === "user")) card.classList.add("right");
    return card;
  }));
  if (!events.length) list.append(el("li", { text: "No events in this session." }));
}

async function showEvent(id) {
  const ev = await api("GET", "/events/" + encodeURIComponent(id));
  state.current = ev;
  $("event-title").textContent = ev.title || "Event " + ev.id;
  const fields = $("event-fields");
  fields.replaceChildren();
  const rows = [["id", ev.id], ["time", ev.timestamp], ["source", ev.source], ["kind", ev.kind],
    ["workspace", ev.workspace], ["session", ev.session], ["tags", (ev.tags || []).join(", ")],
    ["citation", "urchin://events/" + ev.id]];
  for (const [name, value] of rows) {
    if (!value) continue;
    const dd = el("dd");
    if (name === "session") dd.append(el("a", { href: "#/session/" + encodeURIComponent(value), text: value }));
    else dd.textContent = value;
    fields.append(el("dt", { text: name }), dd);
  }
  const marks = (ev.content || "").match(REDACTION) || [];
  fields.append(el("dt", { text: "redactions" }), el("dd", { text: marks.length ? marks.join(", ") : "none" }));
  $("event-content").replaceChildren(richText(ev.content || ""));
  $("event-meta").replaceChildren(...metaRows({ actor: ev.actor, meta: ev.meta }));
}

// Metadata as a readable list: nested keys joined by dots (meta.redactions.github_token), a list of
// plain values joined by commas, anything deeper as compact JSON; all of it text, never markup.
function metaRows(value) {
  const rows = [];
  const walk = (prefix, item, depth) => {
    if (item === undefined || item === null || item === "") return;
    if (typeof item === "object" && !Array.isArray(item) && depth < 4) {
      for (const [key, inner] of Object.entries(item)) walk(prefix ? prefix + "." + key : key, inner, depth + 1);
      return;
    }
    const plain = (v) => v === null || ["string", "number", "boolean"].includes(typeof v);
    const text = Array.isArray(item) && item.every(plain) ? item.map(String).join(", ")
      : typeof item === "object" ? JSON.stringify(item) : String(item);
    rows.push(el("dt", { text: prefix }), el("dd", { text: text }));
  };
  walk("", value, 0);
  return rows.length ? rows : [el("dt", { text: "none" }), el("dd")];
}

async function showFile(path, from, to) {
  const count = Math.max(1, to - from + 1);
  const start = Math.max(1, from - 3);
  const params = new URLSearchParams({ fromLine: String(start), maxLines: String(Math.min(count + 6, 400)) });
  const win = await api("GET", "/files/" + path.split("/").map(encodeURIComponent).join("/") + "?" + params);
  $("file-title").textContent = path;
  $("file-info").textContent = `Lines ${from}–${to} of ${win.totalLines}`;
  $("file-lines").replaceChildren(...(win.lines || []).map((line) => el("li", { class: line.n >= from && line.n <= to ? "hit" : "" },
    el("span", { class: "n", text: String(line.n) }), el("span", { text: line.text }))));
}

// ---- overview -----------------------------------------------------------------------------
const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attrs) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  return node;
}

function chart(activity) {
  const days = activity.days; const sources = activity.sources;
  const width = 720; const height = 220; const pad = 28; const barW = (width - pad) / days.length;
  const max = Math.max(1, ...days.map((d) => Object.values(d.counts).reduce((a, b) => a + b, 0)));
  const root = svg("svg", { viewBox: `0 0 ${width} ${height}`, role: "img",
    "aria-label": `Events per day over ${days.length} days, ${activity.total} in all` });
  days.forEach((d, i) => {
    let y = height - pad;
    sources.forEach((src, s) => {
      const n = d.counts[src] || 0;
      if (!n) return;
      const h = (n / max) * (height - 2 * pad);
      y -= h;
      const rect = svg("rect", { x: pad + i * barW + 1, y, width: Math.max(1, barW - 2), height: h, class: "s" + (s % 8) });
      const title = svg("title"); title.textContent = `${d.day}: ${src} ${n}`; rect.append(title);
      root.append(rect);
    });
    if ((days.length - 1 - i) % 7 === 0) { // ticks a week apart, ending today
      const last = i === days.length - 1;
      const label = svg("text", { x: last ? width - 2 : pad + i * barW, y: height - 8, class: "axis", "text-anchor": last ? "end" : "start" });
      label.textContent = d.day.slice(5);
      root.append(label);
    }
  });
  const top = svg("text", { x: 2, y: pad, class: "axis" }); top.textContent = String(max); root.append(top);
  $("chart").replaceChildren(root);
  $("legend").replaceChildren(...sources.map((src, s) => el("li", {}, el("span", { class: "swatch s" + (s % 8), "aria-hidden": "true" }), src)));
}

function items(list, rows) { $(list).replaceChildren(...(rows.length ? rows : ["none"]).map((r) => el("li", { text: r }))); }

async function showOverview() {
  const [activity, overview] = await Promise.all([api("GET", "/activity?days=30"), api("GET", "/overview")]);
  chart(activity);
  items("roots", (overview.roots || []).map((r) => `${r.name}: ${r.path || ""} ${r.files !== undefined ? "(" + r.files + " files)" : ""}`.trim()));
  const idx = overview.index || {};
  const rows = [];
  if (idx.available) {
    rows.push(`chunks: ${idx.chunks}`);
    for (const [name, s] of Object.entries(idx.roots || {})) rows.push(`${name}: ${s.indexed} indexed, ${s.pending} pending, ${s.failed} failed`);
    try {
      const status = await api("GET", "/index/status");
      if (status.events && status.events.behindJournalBytes !== undefined) rows.unshift(`behind journal: ${status.events.behindJournalBytes} bytes`);
      else if (status.behindJournalBytes !== undefined) rows.unshift(`behind journal: ${status.behindJournalBytes} bytes`);
    } catch (_) { /* the status is extra detail */ }
  } else rows.push("not available" + (idx.reason ? ": " + idx.reason : ""));
  items("index-state", rows);
  items("collectors", (overview.sources || []).map((c) => `${c.name}: ${c.events || 0} events, last run ${c.lastRun || "never"}${c.lastError ? " — " + c.lastError : ""}`));
  items("memories", (overview.memories || []).map((m) => m.title || m.slug || JSON.stringify(m)));
}

// ---- control ------------------------------------------------------------------------------
function showEphemeral(on) {
  $("banner").hidden = !on;
  $("ephemeral").setAttribute("aria-pressed", on ? "true" : "false");
  $("ephemeral").textContent = on ? "Ephemeral: on" : "Ephemeral: off";
}

async function refreshEphemeral() { showEphemeral((await api("GET", "/ephemeral")).on); }

async function toggleEphemeral() {
  const on = $("ephemeral").getAttribute("aria-pressed") !== "true";
  try { showEphemeral((await api("POST", "/ephemeral", { action: on ? "on" : "off" })).on); }
  catch (err) { notice("Could not switch ephemeral mode: " + err.message); }
}

function confirmForget(text) {
  const dialog = $("confirm");
  $("confirm-text").textContent = text;
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    dialog.returnValue = "";
    dialog.showModal();
    $("confirm-cancel").focus();
  });
}

async function forgetEvent() {
  const ev = state.current;
  if (!ev) return;
  if (!(await confirmForget(`Forget event ${ev.id} (${ev.source}, ${ev.timestamp}): “${clip(ev.content || "", 120)}”? It is removed from the journal and every index.`))) return;
  try {
    await api("DELETE", "/events/" + encodeURIComponent(ev.id));
    removeEvents([ev.id]);
    notice(`Forgot event ${ev.id}.`);
    location.hash = "#/timeline";
  } catch (err) { notice("Could not forget: " + err.message); }
}

async function forgetSession() {
  const session = state.session;
  if (!session) return;
  try {
    const preview = await api("POST", "/forget", { session, confirm: false });
    const ids = (preview.preview || []).map((e) => e.id);
    const count = preview.matched;
    if (!(await confirmForget(`Forget session ${session}: ${count} event${count === 1 ? "" : "s"}? They are removed from the journal and every index.`))) return;
    await api("POST", "/forget", { session, confirm: true });
    removeEvents(ids);
    for (const node of document.querySelectorAll("#conversation li.event")) removeEvents([node.getAttribute("data-id")]);
    for (const node of document.querySelectorAll("#timeline li.session-head a")) {
      if (node.textContent === "session " + session) node.parentElement.remove();
    }
    notice(`Forgot session ${session} (${count} events).`);
    location.hash = "#/timeline";
  } catch (err) { notice("Could not forget: " + err.message); }
}

async function copyJson() {
  const text = JSON.stringify(state.current, null, 2);
  try { await navigator.clipboard.writeText(text); notice("Copied the event as JSON."); }
  catch (_) { notice("The browser refused the clipboard; select the content above instead."); }
}

// ---- routing ------------------------------------------------------------------------------
const VIEWS = ["signin", "timeline", "search", "session", "event", "file", "overview"];

function show(view) {
  for (const name of VIEWS) $("view-" + name).hidden = name !== view;
  for (const link of document.querySelectorAll("nav a")) {
    if (link.dataset.view === view) link.setAttribute("aria-current", "page"); else link.removeAttribute("aria-current");
  }
}

async function route() {
  if (!state.csrf) return;
  const hash = location.hash.replace(/^#\/?/, "");
  const [path, query] = hash.split("?");
  const [view, ...rest] = path.split("/");
  const arg = decodeURIComponent(rest.join("/"));
  const params = new URLSearchParams(query || "");
  try {
    if (view === "search") { show("search"); $("q").focus(); }
    else if (view === "overview") { show("overview"); await showOverview(); }
    else if (view === "session" && arg) { show("session"); await showSession(arg); }
    else if (view === "event" && arg) { show("event"); await showEvent(arg); }
    else if (view === "file" && arg) { show("file"); await showFile(arg, Number(params.get("from") || 1), Number(params.get("to") || params.get("from") || 1)); }
    else { show("timeline"); if (nearBottom()) loadOlder(); }
  } catch (err) {
    if (err.status === 401) signedOut(); else notice(err.message);
  }
}

function signedOut() {
  state.csrf = null;
  $("nav").hidden = true; $("controls").hidden = true; $("banner").hidden = true;
  for (const id of ["timeline", "results", "conversation", "event-fields", "file-lines"]) $(id).replaceChildren();
  $("event-content").textContent = ""; $("event-meta").replaceChildren();
  show("signin");
}

async function logout() {
  try { await api("POST", "/auth/logout", {}); } catch (_) { /* signed out either way */ }
  signedOut();
}

async function start() {
  $("search-form").addEventListener("submit", runSearch);
  $("ephemeral").addEventListener("click", toggleEphemeral);
  $("logout").addEventListener("click", logout);
  $("forget-event").addEventListener("click", forgetEvent);
  $("forget-session").addEventListener("click", forgetSession);
  $("copy-json").addEventListener("click", copyJson);
  window.addEventListener("hashchange", route);
  new IntersectionObserver((entries) => { if (entries.some((e) => e.isIntersecting)) loadOlder(); }, { rootMargin: "400px" }).observe($("more"));
  try {
    state.csrf = (await api("GET", "/auth/session")).csrf;
  } catch (_) {
    signedOut();
    return;
  }
  $("nav").hidden = false; $("controls").hidden = false;
  await refreshEphemeral();
  await route();
  if (!state.newer) loadOlder();
  setInterval(pollNewer, POLL_MS);
}

document.addEventListener("DOMContentLoaded", start);
