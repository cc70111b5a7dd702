// The live view of a Floodgate server (see package liveview's doc). It
// polls the admin JSON endpoints of the listener that served it and draws
// them. Every value from the server goes into the page as text (text nodes,
// textContent), never as markup: keys are chosen by clients.
"use strict";

const TOKEN_KEY = "floodgate.admin-token"; // in sessionStorage
const HISTORY_MS = 60 * 1000; // what the sparklines show
const REFRESH = { def: 1, min: 0.25, max: 60 }; // seconds, ?refresh=

const state = {
  token: sessionStorage.getItem(TOKEN_KEY) || "",
  refreshMs: REFRESH.def * 1000,
  warning: "", // a bad ?refresh=, said in the banner
  history: new Map(), // policy -> [{t, decisions, denials}], the last minute
  policies: [], // the names in the policy selector
  topPolicy: "", // the policy whose top consumers are shown
  updated: null, // when /admin/stats last answered
};

// ---- start, token, timing ----

function init() {
  takeTokenFromFragment();
  state.refreshMs = readRefresh(new URLSearchParams(location.search));
  byId("token-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    setToken(byId("token").value.trim());
    byId("token").value = "";
    wake();
  });
  byId("top-policy").addEventListener("change", (ev) => {
    state.topPolicy = ev.target.value;
    wake();
  });
  loop();
}

// takeTokenFromFragment keeps a #token=... given in the URL and removes it
// from the address bar, so that it is not left in the history.
function takeTokenFromFragment() {
  const token = new URLSearchParams(location.hash.slice(1)).get("token");
  if (token !== null) {
    setToken(token);
    history.replaceState(null, "", location.pathname + location.search);
  }
}

function setToken(token) {
  state.token = token;
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
}

function readRefresh(params) {
  const raw = params.get("refresh");
  if (raw === null) return REFRESH.def * 1000;
  const s = Number(raw);
  if (raw.trim() === "" || !(s >= REFRESH.min && s <= REFRESH.max)) {
    state.warning = `?refresh=${raw} is not a number of seconds from ${REFRESH.min} to ${REFRESH.max}: ` +
      `refreshing every ${REFRESH.def} s.`;
    return REFRESH.def * 1000;
  }
  return s * 1000;
}

// The loop waits for each refresh to finish before it sleeps, so a slow
// server never has requests piling up; wake cuts a sleep short.
let wakeUp = () => {};
function wake() { wakeUp(); }

async function loop() {
  for (;;) {
    await refresh();
    await new Promise((resolve) => { wakeUp = resolve; setTimeout(resolve, state.refreshMs); });
  }
}

// ---- fetching ----

class FetchError extends Error {
  constructor(path, status, detail) {
    super(status ? `GET ${path} answered ${status}: ${detail}` : `GET ${path}: ${detail}`);
    this.path = path;
    this.status = status; // 0: no answer
    this.detail = detail;
  }
  // explain says what went wrong in words for the banner.
  explain() {
    if (this.status === 401) return "The admin token is missing or wrong (401 Unauthorized): enter it above.";
    if (this.status === 0) return `The server is unreachable (GET ${this.path}: ${this.detail}); showing the last data received.`;
    return this.message;
  }
}

async function getJSON(path) {
  const headers = state.token ? { Authorization: "Bearer " + state.token } : {};
  let resp;
  try {
    resp = await fetch(path, { headers, cache: "no-store", signal: AbortSignal.timeout(Math.max(5000, state.refreshMs)) });
  } catch (err) {
    throw new FetchError(path, 0, err.name === "TimeoutError" ? "no answer in time" : "no connection");
  }
  if (!resp.ok) {
    // A problem+json body's detail names the problem; anything else is ignored.
    const body = await resp.json().catch(() => ({}));
    throw new FetchError(path, resp.status, body.detail || resp.statusText || "error");
  }
  return resp.json();
}

async function refresh() {
  const [stats, near, events, status] = await Promise.allSettled([
    getJSON("/admin/stats"), getJSON("/admin/near-limit?n=50"),
    getJSON("/admin/events?n=20"), getJSON("/admin/status"),
  ]);
  const failures = [stats, near, events].filter((r) => r.status === "rejected").map((r) => r.reason);
  if (stats.status === "fulfilled") {
    state.updated = new Date();
    drawPolicies(stats.value);
    choosePolicies(stats.value.policies.map((p) => p.policy));
  }
  if (state.topPolicy) {
    const path = `/admin/top?policy=${encodeURIComponent(state.topPolicy)}&n=10`;
    await getJSON(path).then(drawTop, (err) => failures.push(err));
  }
  if (near.status === "fulfilled") drawNear(near.value);
  if (events.status === "fulfilled") drawEvents(events.value);
  drawStatus(status);
  drawBanner(failures);
}

// ---- drawing ----

function drawBanner(failures) {
  // A wrong token or a lost server explains every other failure: say it first.
  failures.sort((a, b) => rank(a) - rank(b));
  const lines = failures.length ? [failures[0].explain()] : [];
  if (state.warning) lines.push(state.warning);
  const banner = byId("banner");
  banner.textContent = lines.join(" ");
  banner.hidden = lines.length === 0;
  banner.dataset.status = failures.length ? String(failures[0].status) : "";
  const when = state.updated ? state.updated.toLocaleTimeString() : "never";
  const age = state.updated ? Math.round((Date.now() - state.updated) / 1000) : 0;
  byId("updated").textContent = failures.length && state.updated
    ? `last updated ${when} (${age} s ago)` : `last updated ${when}`;
}

function rank(err) { return err.status === 401 ? 0 : err.status === 0 ? 1 : 2; }

function drawPolicies(stats) {
  const now = Date.now();
  const rows = stats.policies.map((p) => {
    const points = remember(p, now);
    const t = p.totals || {};
    const tr = row([
      p.policy, num(p.decisions_per_second), num(p.denials_per_second), sparkline(points, now),
      num(t.allowed), num(t.denied), num(t.shadow_denied), num(t.shed), num(t.error),
      `${num(p.near_limit_decisions)} / ${num(p.near_limit_keys)}`, spikeText(p),
    ]);
    tr.dataset.policy = p.policy;
    tr.classList.toggle("spiking", spikeText(p) !== "no");
    return tr;
  });
  for (const name of state.history.keys()) {
    if (!stats.policies.some((p) => p.policy === name)) state.history.delete(name);
  }
  fill(document.querySelector("#policies tbody"), rows, 11, "No decisions yet.");
}

// remember adds a policy's rates to its last minute and returns it.
function remember(p, now) {
  const points = (state.history.get(p.policy) || []).filter((s) => now - s.t <= HISTORY_MS);
  points.push({ t: now, decisions: p.decisions_per_second, denials: p.denials_per_second });
  state.history.set(p.policy, points);
  return points;
}

function spikeText(p) {
  if (!p.spiking || !p.spiking.length) return "no";
  return p.spiking.map((sig) => `${sig} (baseline ${num(p.baseline[sig])}/s)`).join(", ");
}

// sparkline draws the last minute's decisions and denials per second as
// two lines in a small SVG, scaled to the highest rate.
function sparkline(points, now) {
  const W = 120, H = 28, NS = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(NS, "svg");
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  svg.setAttribute("class", "sparkline");
  const top = Math.max(1, ...points.map((s) => s.decisions));
  for (const signal of ["decisions", "denials"]) {
    const line = document.createElementNS(NS, "polyline");
    line.setAttribute("class", signal);
    line.setAttribute("points", points.map((s) => {
      const x = W - ((now - s.t) / HISTORY_MS) * W;
      const y = H - 1 - (s[signal] / top) * (H - 2);
      return `${x.toFixed(1)},${y.toFixed(1)}`;
    }).join(" "));
    svg.append(line);
  }
  return svg;
}

// choosePolicies keeps the top consumers' selector in step with the
// policies, rebuilding it only when they change (not under an open menu).
function choosePolicies(names) {
  if (!names.includes(state.topPolicy)) state.topPolicy = names[0] || "";
  if (names.join("\n") === state.policies.join("\n")) return;
  state.policies = names;
  const select = byId("top-policy");
  select.replaceChildren(...names.map((name) => new Option(name, name)));
  select.value = state.topPolicy;
}

function drawTop(data) {
  const notes = [];
  for (const by of ["admitted", "denied"]) {
    const list = data.lists.find((l) => l.by === by);
    const rows = list ? list.entries.map((e) => row([e.key, num(e.count), "± " + num(e.error)])) : [];
    fill(document.querySelector(`#top-${by} tbody`), rows, 3, `No ${by} units in the window.`);
    if (list) notes.push(`${by}: ${num(list.total)} units in the last ${list.window_seconds} s, each count at most ${num(list.max_error)} too high (${list.counters} counters)`);
  }
  byId("top-note").textContent = notes.join("; ") + ".";
}

function drawNear(data) {
  const now = Date.now();
  const rows = data.entries.map((e) => {
    const meter = document.createElement("meter");
    // Above the ratio is the bad end of the meter, so browsers draw it red.
    Object.assign(meter, { min: 0, max: 1, optimum: 0, low: data.ratio / 2, high: data.ratio, value: e.used });
    const used = document.createElement("span");
    used.append(meter, ` ${Math.round(e.used * 100)}%`);
    const reset = Date.parse(e.reset_at);
    const tr = row([e.policy, e.limit, e.key, used, num(e.remaining), num(e.max),
      `in ${Math.max(0, Math.ceil((reset - now) / 1000))} s`]);
    tr.lastChild.title = new Date(reset).toLocaleString();
    return tr;
  });
  fill(document.querySelector("#near tbody"), rows, 7, "No key is near its limit.");
  byId("near-note").textContent = `Keys whose last decision left them at or above ${Math.round(data.ratio * 100)}% of a limit.`;
}

function drawEvents(data) {
  const items = data.events.map((e) => {
    const li = document.createElement("li");
    li.append(span("time", new Date(e.time).toLocaleTimeString()), " ", span("kind", e.kind), " ");
    if (e.policy) li.append(span("policy", e.policy), " ");
    li.append(e.message);
    return li;
  });
  if (!items.length) items.push(span("empty", "No events yet."));
  document.querySelector("#events ol").replaceChildren(...items);
}

// drawStatus fills the server panel, or says why it cannot without
// touching the rest of the page (a server may not have /admin/status).
function drawStatus(result) {
  const error = byId("status-error");
  error.hidden = result.status === "fulfilled";
  const s = result.status === "fulfilled" ? result.value : {};
  if (result.status === "rejected") error.textContent = `Server status unavailable: ${result.reason.message}`;
  byId("surface").textContent = s.surface ? `${s.surface}` : "";
  byId("status-version").textContent = s.version || "—";
  byId("status-started").textContent = s.started_at ? new Date(s.started_at).toLocaleString() : "—";
  byId("status-store").textContent = (s.store && s.store.name) || "—";
  byId("status-breaker").textContent = s.store ? s.store.breaker || "no breaker" : "—";
  byId("status-config").textContent = s.config
    ? `${s.config.path || "(none)"}, loaded ${s.config.loaded_at ? new Date(s.config.loaded_at).toLocaleString() : "—"}` : "—";
  byId("status-policies").replaceChildren(...(s.policies || []).map((p) => {
    const li = document.createElement("li");
    li.textContent = `${p.domain}: ${p.limits} limit${p.limits === 1 ? "" : "s"}`;
    return li;
  }));
}

// ---- small helpers ----

function byId(id) { return document.getElementById(id); }

function span(cls, text) {
  const s = document.createElement("span");
  s.className = cls;
  s.textContent = text;
  return s;
}

// row makes a table row of cells, each a string (put in as text) or a node.
function row(cells) {
  const tr = document.createElement("tr");
  for (const cell of cells) {
    const td = document.createElement("td");
    td.append(cell);
    tr.append(td);
  }
  return tr;
}

// fill replaces a table body's rows, or says empty in one wide row.
function fill(tbody, rows, columns, empty) {
  if (!rows.length) {
    const tr = row([empty]);
    tr.firstChild.colSpan = columns;
    tr.className = "empty";
    rows = [tr];
  }
  tbody.replaceChildren(...rows);
}

function num(x) {
  return typeof x === "number" ? x.toLocaleString(undefined, { maximumFractionDigits: 1 }) : "—";
}

init();
