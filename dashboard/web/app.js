// The firehose dashboard. Plain JavaScript, no dependencies, nothing loaded
// from the network. The server filters, sorts and counts; the page asks for
// snapshots (/api/v1/fleet, /ansible, /changes, /health) and listens to
// /api/v1/stream, which tells it when to ask again. Rendering is batched:
// at most one snapshot request in flight per view, and DOM work once per frame.
"use strict";

const $ = (id) => document.getElementById(id);
const REFRESH_MS = 200; // least time between two snapshot requests of a view

let info = { available: true, filters: {} };
let current = null; // the view shown
const views = {};

// ---- helpers ---------------------------------------------------------------

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "class") e.className = v;
      else if (k === "text") e.textContent = v;
      else if (k.startsWith("data-")) e.setAttribute(k, v);
      else if (k === "title") e.title = v;
      else e.setAttribute(k, v);
    }
  }
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

async function getJSON(path) {
  const r = await fetch(path, { cache: "no-store" });
  const body = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error(body.error || r.status + " " + r.statusText);
  return body;
}

const nf = new Intl.NumberFormat("en");
const fmtNum = (n) => (n === undefined || n === null ? "–" : nf.format(Math.round(n)));

function ago(ms) {
  if (!ms) return "–";
  const s = Math.max(0, (Date.now() - ms) / 1000);
  if (s < 45) return Math.round(s) + "s ago";
  if (s < 3600) return Math.round(s / 60) + "m ago";
  if (s < 86400 * 2) return Math.round(s / 3600) + "h ago";
  return Math.round(s / 86400) + "d ago";
}

function duration(ms) {
  if (ms === undefined || ms === null) return "–";
  const s = ms / 1000;
  if (s < 60) return s.toFixed(s < 10 ? 1 : 0) + "s";
  if (s < 3600) return Math.floor(s / 60) + "m " + String(Math.round(s % 60)).padStart(2, "0") + "s";
  return Math.floor(s / 3600) + "h " + String(Math.round((s % 3600) / 60)).padStart(2, "0") + "m";
}

function clock(ms) {
  const d = new Date(ms);
  return d.toLocaleTimeString("en-GB", { hour12: false }) + "." + String(d.getMilliseconds()).padStart(3, "0");
}

// seen remembers when the page first showed a thing (a node's run, a play, a
// failed task, a message), in Date.now() terms; elements carry it as
// data-seen, which is how the browser tests measure the delay.
const seenAt = new Map();
function seen(key) {
  let t = seenAt.get(key);
  if (t === undefined) {
    t = Date.now();
    seenAt.set(key, t);
    if (seenAt.size > 50000) seenAt.delete(seenAt.keys().next().value);
  }
  return t;
}

// A refresher runs fn (which returns a promise) when asked, at most once per
// REFRESH_MS and never twice at once; asks in between are merged.
function refresher(fn) {
  let running = false, again = false, last = 0, timer = null;
  const run = async () => {
    timer = null;
    if (running) { again = true; return; }
    running = true; again = false; last = Date.now();
    try { await fn(); } catch (e) { console.warn(e); }
    running = false;
    if (again) ask();
  };
  const ask = () => {
    if (running) { again = true; return; }
    if (timer) return;
    const wait = Math.max(0, last + REFRESH_MS - Date.now());
    timer = setTimeout(run, wait);
  };
  return ask;
}

// ---- the live connection ---------------------------------------------------

let source = null;
function setConn(state, text) {
  const c = $("conn");
  c.dataset.state = state;
  $("conn-text").textContent = text;
}

// listen opens one stream for the view shown; opts.payload false asks for
// topics only (the views that re-read snapshots need no payloads); past
// asks for that many of the latest messages from the bus's history first
// (on a reconnect too), and onOpen is then told, to start its rows afresh.
function listen(filters, onMessage, onStats, payload, past, onOpen) {
  if (source) source.close();
  source = null;
  if (!info.available || !filters || !filters.length) return;
  const q = new URLSearchParams();
  for (const f of filters) q.append("filter", f);
  if (!payload) q.set("payload", "0");
  if (past) q.set("history", String(past));
  const es = new EventSource("api/v1/stream?" + q.toString());
  source = es;
  es.addEventListener("open", (ev) => {
    setConn("live", "live");
    if (onOpen && ev.data) { try { onOpen(JSON.parse(ev.data)); } catch { /* not ours */ } }
  });
  es.addEventListener("message", (ev) => {
    let m;
    try { m = JSON.parse(ev.data); } catch { return; }
    onMessage(m);
  });
  es.addEventListener("stats", (ev) => { if (onStats) onStats(JSON.parse(ev.data)); });
  es.onerror = () => { if (source === es) setConn(es.readyState === 2 ? "down" : "connecting", es.readyState === 2 ? "disconnected" : "reconnecting…"); };
}

// ---- Fleet -----------------------------------------------------------------

views.fleet = (() => {
  const ROW = 34, OVERSCAN = 12, PAGE = 300;
  const state = { org: "", group: "", q: "", status: "", page: null, lastRun: new Map() };
  const scroll = $("fleet-scroll"), rows = $("fleet-rows"), spacer = $("fleet-spacer");

  function query(offset) {
    const p = new URLSearchParams({ offset: String(offset), limit: String(PAGE) });
    if (state.org) p.set("org", state.org);
    if (state.group) p.set("policy_group", state.group);
    if (state.q) p.set("q", state.q);
    if (state.status && state.status !== "other") p.set("status", state.status);
    if (state.status === "other") p.set("status", "unknown");
    return "api/v1/fleet?" + p.toString();
  }

  function wantedOffset() {
    const first = Math.floor(scroll.scrollTop / ROW);
    return Math.max(0, first - 100);
  }

  const refresh = refresher(async () => {
    const page = await getJSON(query(wantedOffset()));
    state.page = page;
    render();
  });

  function fillSelect(sel, values, chosen) {
    const have = Array.from(sel.options).slice(1).map((o) => o.value).join("\n");
    if (have === values.join("\n")) return;
    sel.replaceChildren(el("option", { value: "" }, "all"), ...values.map((v) => el("option", { value: v }, v)));
    sel.value = values.includes(chosen) ? chosen : "";
  }

  function render() {
    const p = state.page;
    if (!p) return;
    const c = p.counts || {};
    const other = p.matched - (c.failure || 0) - (c.success || 0);
    $("fleet-total").textContent = fmtNum(p.matched);
    $("fleet-failure").textContent = fmtNum(c.failure || 0);
    $("fleet-success").textContent = fmtNum(c.success || 0);
    $("fleet-other").textContent = fmtNum(other);
    for (const card of document.querySelectorAll("#fleet-cards .card")) {
      card.classList.toggle("sel", card.dataset.status === state.status);
      const n = card.querySelector(".num").textContent;
      card.classList.toggle("zero", n === "0" && card.dataset.status !== "");
    }
    fillSelect($("fleet-org"), p.orgs, state.org);
    fillSelect($("fleet-group"), p.policy_groups, state.group);
    $("fleet-empty").hidden = p.total > 0;
    spacer.style.height = p.listed * ROW + "px";
    paint();
  }

  // paint draws the rows in view from the page fetched; when the view has
  // scrolled beyond it, it asks for the right page.
  function paint() {
    const p = state.page;
    if (!p) return;
    const first = Math.max(0, Math.floor(scroll.scrollTop / ROW) - OVERSCAN);
    const last = Math.min(p.listed, Math.ceil((scroll.scrollTop + scroll.clientHeight) / ROW) + OVERSCAN);
    if (first < p.offset || last > p.offset + p.rows.length && p.offset + p.rows.length < p.listed) refresh();
    const frag = document.createDocumentFragment();
    for (let i = Math.max(first, p.offset); i < Math.min(last, p.offset + p.rows.length); i++) {
      frag.append(row(p.rows[i - p.offset], i));
    }
    rows.replaceChildren(frag);
    const shown = p.listed ? `${fmtNum(first + 1)}–${fmtNum(Math.min(last, p.listed))} of ${fmtNum(p.listed)}` : "";
    $("fleet-range").textContent = shown;
  }

  function row(n, i) {
    const key = n.topic + "|" + (n.run_id || n.received) + "|" + n.status;
    const t = seen(key);
    const prev = state.lastRun.get(n.topic);
    state.lastRun.set(n.topic, key);
    const fresh = prev !== undefined && prev !== key;
    const end = n.end_time ? Date.parse(n.end_time) : n.received;
    const errText = [n.failed_cookbook && "cookbook " + n.failed_cookbook, n.owner && "owner " + n.owner,
      n.error_class && n.error_class + (n.error_message ? ": " + n.error_message : "")].filter(Boolean).join(" · ");
    const r = el("div", {
      class: "frow fleet-cols " + n.status + (fresh ? " flash" : ""),
      "data-node": n.org + "/" + n.name, "data-status": n.status, "data-run": n.run_id || "", "data-seen": String(t),
    },
      el("span", null, el("span", { class: "pill " + n.status }, n.status)),
      el("span", { class: "node", title: n.name }, n.name),
      el("span", { title: n.org }, n.org),
      el("span", { title: n.policy_name || "" }, n.policy_name || "–"),
      el("span", { title: n.policy_group || "" }, n.policy_group || "–"),
      el("span", { title: n.end_time || "" }, ago(end)),
      el("span", { class: "r" }, duration(n.duration_ms)),
      el("span", { class: "r" }, n.updated_resource_count ?? "–"),
      el("span", { class: "r" + (n.failed_resource_count ? " err" : "") }, n.failed_resource_count ?? "–"),
      el("span", { class: "err", title: errText }, errText));
    r.style.top = i * ROW + "px";
    return r;
  }

  let frame = 0;
  scroll.addEventListener("scroll", () => { if (!frame) frame = requestAnimationFrame(() => { frame = 0; paint(); }); });
  $("fleet-org").addEventListener("change", (e) => { state.org = e.target.value; scroll.scrollTop = 0; refresh(); });
  $("fleet-group").addEventListener("change", (e) => { state.group = e.target.value; scroll.scrollTop = 0; refresh(); });
  let typing = null;
  $("fleet-q").addEventListener("input", (e) => {
    clearTimeout(typing);
    typing = setTimeout(() => { state.q = e.target.value.trim(); scroll.scrollTop = 0; refresh(); }, 150);
  });
  for (const card of document.querySelectorAll("#fleet-cards .card")) {
    card.addEventListener("click", () => {
      state.status = state.status === card.dataset.status ? "" : card.dataset.status;
      scroll.scrollTop = 0;
      refresh();
    });
  }
  return {
    show() { refresh(); listen(info.filters.fleet, refresh); },
    tick() { paint(); },
  };
})();

// ---- Ansible ---------------------------------------------------------------

views.ansible = (() => {
  const HOSTS_SHOWN = 12, FAILED_SHOWN = 6;
  const refresh = refresher(async () => render(await getJSON("api/v1/ansible")));

  // failedTask draws one failed or unreachable result; the snapshot and a
  // live message draw the same element, so that it is first seen once.
  function failedTask(f) {
    const key = "fail|" + f.topic + "|" + f.task;
    return el("div", { class: "failed-task " + f.status, "data-failed-task": f.host + "|" + f.task, "data-key": key, "data-seen": String(seen(key)) },
      el("div", { class: "where" }, `${f.status === "UNREACHABLE" ? "unreachable" : "failed"}: ${f.host} — ${f.task}`),
      f.message ? el("div", { class: "msg" }, f.message) : null);
  }

  // A failure is drawn as soon as its message arrives, before the next
  // snapshot redraws the view: it is what an operator looks for.
  function onMessage(m) {
    refresh();
    const p = m.payload;
    if (!p || typeof p !== "object" || (p.status !== "FAILED" && p.status !== "UNREACHABLE") || !p.ansible_host || !p.playbook_id) return;
    const task = String(p.ansible_task || "").replace(/^TASK: /, "");
    const r = p.ansible_result && typeof p.ansible_result === "object" ? p.ansible_result : {};
    let message = typeof r.msg === "string" ? r.msg : (r.msg !== undefined ? JSON.stringify(r.msg) : "");
    if (!message && typeof r.stderr === "string") message = r.stderr;
    if (message.length > 400) message = message.slice(0, 400) + "…";
    let card = document.querySelector(`.play[data-play="${CSS.escape(p.playbook_id)}"]`);
    if (!card) {
      card = el("div", { class: "play running", "data-play": p.playbook_id, "data-status": "running" },
        el("div", { class: "play-head" }, el("span", { class: "pill running" }, "RUNNING"), el("span", { class: "play-name" }, p.playbook_name || "")));
      $("plays").prepend(card);
      $("ansible-empty").hidden = true;
    }
    const f = { host: p.ansible_host, task, status: p.status, message, topic: m.topic };
    if (!card.querySelector(`.failed-task[data-key="${CSS.escape("fail|" + f.topic + "|" + f.task)}"]`)) card.append(failedTask(f));
  }

  function play(p) {
    const status = p.status;
    const took = (p.finished || Date.now()) - p.started;
    const card = el("div", { class: "play " + status, "data-play": p.id, "data-status": status, "data-seen": String(seen("play|" + p.id)) },
      el("div", { class: "play-head" },
        el("span", { class: "pill " + status }, status === "running" ? "RUNNING" : status),
        el("span", { class: "play-name" }, p.name || "(unnamed play)"),
        el("span", { class: "play-meta" },
          [p.controller && "on " + p.controller, "started " + ago(p.started), (status === "running" ? "running " : "took ") + duration(took), p.id.slice(0, 8)]
            .filter(Boolean).join(" · "))));
    const hosts = p.hosts || [];
    if (hosts.length) {
      const t = el("table", { class: "hosts" },
        el("tr", null, el("th", null, `hosts (${hosts.length})`), el("th", null, "ok"), el("th", null, "changed"),
          el("th", null, "failed"), el("th", null, "unreachable"), el("th", null, "skipped")));
      for (const h of hosts.slice(0, HOSTS_SHOWN)) {
        const td = (v, cls) => el("td", { class: v ? cls : "n0" }, v);
        t.append(el("tr", { "data-host": h.name }, el("td", null, h.name), td(h.ok, ""), td(h.changed, "chg"),
          td(h.failed, "fail"), td(h.unreachable, "unr"), td(h.skipped, "")));
      }
      card.append(t);
      if (hosts.length > HOSTS_SHOWN) card.append(el("div", { class: "more" }, `and ${hosts.length - HOSTS_SHOWN} more hosts`));
    }
    for (const f of p.failed.slice(0, FAILED_SHOWN)) card.append(failedTask(f));
    if (p.failed.length > FAILED_SHOWN) card.append(el("div", { class: "more" }, `and ${p.failed.length - FAILED_SHOWN} more failures`));
    return card;
  }

  function render(s) {
    $("ansible-empty").hidden = s.plays.length > 0;
    const running = s.plays.filter((p) => p.status === "running").length;
    $("ansible-count").textContent = s.plays.length ? `${running} running · ${s.plays.length - running} finished` : "";
    $("plays").replaceChildren(...s.plays.map(play));
    $("tasks").replaceChildren(...s.stream.slice(0, 80).map((t) =>
      el("div", { class: "task", "data-task-status": t.status },
        el("span", { class: "time" }, clock(t.received).slice(0, 8)),
        el("span", null, el("span", { class: "pill " + t.status }, t.status)),
        el("span", { title: t.host }, t.host),
        el("span", { title: t.task }, t.task),
        t.message && t.status !== "OK" && t.status !== "SKIPPED" ? el("span", { class: "msg", title: t.message }, t.message) : null)));
  }
  return { show() { refresh(); listen(info.filters.ansible, onMessage, null, true); }, tick: refresh };
})();

// ---- Stream ----------------------------------------------------------------

views.stream = (() => {
  const KEEP = 400; // rows kept on the page
  let paused = false, pending = [], count = 0, frame = 0, selected = null, held = 0;
  const list = $("stream-rows");

  function topicClass(topic) {
    const first = topic.split("/", 1)[0];
    return ["chef", "ansible", "configdb", "gerrit", "launchpad", "gearman-subunit"].includes(first) ? "t-" + first : "t-other";
  }

  function payloadText(m) {
    if (m.payload !== undefined) return JSON.stringify(m.payload);
    if (m.text !== undefined) return m.text;
    if (m.base64 !== undefined) return "base64:" + m.base64;
    return "";
  }

  function onMessage(m) {
    count++;
    pending.push(m);
    if (pending.length > KEEP) pending.splice(0, pending.length - KEEP);
    if (paused) { held++; $("stream-pause").textContent = `Resume (${fmtNum(held)} new)`; return; }
    if (!frame) frame = requestAnimationFrame(flush);
  }

  function flush() {
    frame = 0;
    $("stream-count").textContent = fmtNum(count);
    if (!pending.length) return;
    const frag = document.createDocumentFragment();
    for (let i = pending.length - 1; i >= 0; i--) {
      const m = pending[i];
      const r = el("div", { class: "msg-row", "data-topic": m.topic, "data-seen": String(Date.now()) },
        el("span", { class: "time" }, clock(Date.parse(m.time))),
        el("span", { class: topicClass(m.topic), title: m.topic }, m.topic + (m.retained ? " (retained)" : "")),
        el("span", { class: "payload" }, payloadText(m).slice(0, 300)));
      r._msg = m;
      frag.append(r);
    }
    pending = [];
    list.prepend(frag);
    $("stream-empty").hidden = true;
    while (list.childElementCount > KEEP) list.lastElementChild.remove();
  }

  function highlight(json) {
    const out = document.createDocumentFragment();
    const re = /("(?:\\.|[^"\\])*")(\s*:)?|\b(true|false|null)\b|(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)/g;
    let last = 0, m;
    while ((m = re.exec(json))) {
      out.append(json.slice(last, m.index));
      if (m[1]) { out.append(el("span", { class: m[2] ? "j-k" : "j-s" }, m[1])); if (m[2]) out.append(m[2]); }
      else if (m[3]) out.append(el("span", { class: "j-b" }, m[3]));
      else out.append(el("span", { class: "j-n" }, m[4]));
      last = re.lastIndex;
    }
    out.append(json.slice(last));
    return out;
  }

  list.addEventListener("click", (e) => {
    const r = e.target.closest(".msg-row");
    if (!r || !r._msg) return;
    if (selected) selected.classList.remove("sel");
    selected = r; r.classList.add("sel");
    const m = r._msg;
    const body = m.payload !== undefined ? highlight(JSON.stringify(m.payload, null, 2)) : payloadText(m);
    $("stream-detail").replaceChildren(
      el("div", { class: topicClass(m.topic) + " mono" }, m.topic),
      el("div", { class: "muted" }, `${m.time} · QoS ${m.qos}${m.retained ? " · retained" : ""}`),
      el("pre", { class: "mono" }, body));
  });

  function watch() {
    const f = $("stream-filter").value.trim() || "#";
    const filters = f.split(/\s*,\s*|\s+/).filter(Boolean);
    const q = new URLSearchParams();
    for (const x of filters) q.append("filter", x);
    history.replaceState(null, "", "#stream?" + q.toString());
    listen(filters, onMessage, (s) => {
      $("stream-rate").textContent = s.rate >= 10 ? fmtNum(s.rate) : s.rate.toFixed(1);
      $("stream-dropped").textContent = fmtNum(s.dropped);
      $("stream-dropped-wrap").hidden = !s.dropped;
    }, true, KEEP, (o) => {
      // The latest messages from the history come first: a reconnect
      // brings them again, so the rows start afresh.
      if (o.history !== undefined) { list.replaceChildren(); pending = []; }
    });
  }

  $("stream-form").addEventListener("submit", (e) => { e.preventDefault(); watch(); });
  $("stream-pause").addEventListener("click", () => {
    paused = !paused; held = 0;
    $("stream-pause").textContent = paused ? "Resume" : "Pause";
    if (!paused && !frame) frame = requestAnimationFrame(flush);
  });
  $("stream-clear").addEventListener("click", () => { list.replaceChildren(); pending = []; count = 0; flush(); $("stream-empty").hidden = false; });
  return {
    show(params) {
      const fs = params.getAll("filter");
      if (fs.length) $("stream-filter").value = fs.join(" ");
      watch();
    },
  };
})();

// ---- Changes ---------------------------------------------------------------

views.changes = (() => {
  const NAMES = { configdb: "ConfigDB", gerrit: "Gerrit", launchpad: "Launchpad", subunit: "CI" };
  let only = "", last = null;
  const refresh = refresher(async () => { last = await getJSON("api/v1/changes"); render(); });

  function render() {
    if (!last) return;
    const list = last.changes.filter((c) => !only || c.source === only);
    $("changes-empty").hidden = list.length > 0;
    $("changes").replaceChildren(...list.map((c) => {
      const title = c.url ? el("a", { href: c.url, target: "_blank", rel: "noopener noreferrer" }, c.title) : c.title;
      return el("div", { class: "change " + (c.state || ""), "data-change-topic": c.topic, "data-seen": String(seen("chg|" + c.topic + "|" + c.received)) },
        el("span", { class: "time", title: new Date(c.received).toISOString() }, ago(c.received)),
        el("span", null, el("span", { class: "src " + c.source }, NAMES[c.source] || c.source)),
        el("div", null, el("div", { class: "title" }, title), c.detail ? el("div", { class: "detail-line" }, c.detail) : null));
    }));
  }
  for (const chip of document.querySelectorAll("#changes-sources .chip")) {
    chip.addEventListener("click", () => {
      only = chip.dataset.source;
      for (const c of document.querySelectorAll("#changes-sources .chip")) c.classList.toggle("on", c === chip);
      render();
    });
  }
  return { show() { refresh(); listen(info.filters.changes, refresh); }, tick: render };
})();

// ---- Health ----------------------------------------------------------------

views.health = (() => {
  let prev = null;
  const refresh = refresher(async () => {
    const h = await getJSON("api/v1/health");
    render(h, prev);
    prev = h;
  });

  function rate(h, p, get) {
    if (!p) return null;
    const dt = (h.time - p.time) / 1000;
    return dt > 0 ? Math.max(0, (get(h) - get(p)) / dt) : null;
  }

  function card(num, label, sub, cls) {
    return el("div", { class: "card " + (cls || ""), "data-metric": label }, el("span", { class: "num" }, num), el("span", { class: "lbl" }, label), sub ? el("span", { class: "sub" }, sub) : null);
  }

  function render(h, p) {
    const b = h.broker;
    const dropped = (x) => Object.values(x.broker.messages_dropped || {}).reduce((a, v) => a + v, 0);
    const rIn = rate(h, p, (x) => x.broker.messages_received), rOut = rate(h, p, (x) => x.broker.messages_sent);
    const rDrop = rate(h, p, dropped);
    const perSec = (r) => (r === null ? "measuring…" : (r >= 10 ? fmtNum(r) : r.toFixed(1)) + " /s");
    const cards = [];
    if (b.present) {
      cards.push(card(fmtNum(b.clients), "MQTT clients", fmtNum(b.subscriptions) + " subscriptions"));
      cards.push(card(perSec(rIn), "messages in", fmtNum(b.messages_received) + " since start"));
      cards.push(card(perSec(rOut), "messages out", fmtNum(b.messages_sent) + " since start"));
      const d = dropped(h);
      cards.push(card(fmtNum(d), "dropped", rDrop ? perSec(rDrop) : "for slow subscribers", d ? "bad" : "good"));
      cards.push(card(fmtNum(b.publish_denied), "denied publishes", fmtNum(b.auth_failures) + " failed logins", b.publish_denied ? "warn" : ""));
      cards.push(card(fmtNum(b.retained), "retained", "last values kept"));
    } else {
      cards.push(card("external", "broker", "see the external broker's own metrics"));
    }
    cards.push(card(fmtNum(h.dashboard.streams), "live streams", fmtNum(h.dashboard.dropped) + " dropped for slow pages"));
    $("health-cards").replaceChildren(...cards);

    const routes = $("health-routes");
    const head = el("tr", null, ...["route", "sink", "required", "sink state", "delivered", "outboxed", "in outbox", "oldest", "dropped", "rejected", "refused"].map((t) => el("th", null, t)));
    if (!h.routes.length) {
      routes.replaceChildren(head, el("tr", null, el("td", { colspan: "11", class: "l muted" }, "No routes configured: messages stay on the MQTT bus.")));
    } else {
      routes.replaceChildren(head, ...h.routes.map((r) => {
        const m = r.messages || {};
        const n = (k, bad) => el("td", { class: bad && m[k] ? "bad" : "" }, fmtNum(m[k] || 0));
        return el("tr", { "data-route": r.name },
          el("td", null, r.name), el("td", { class: "l" }, r.sink), el("td", { class: "l" }, r.required ? "yes" : "no"),
          el("td", { class: "l " + (r.sink_up ? "up" : "down"), "data-sink-reason": r.sink_reason || "" }, r.sink_up ? "● up" : r.sink_reason ? "● down: " + r.sink_reason : "● down"),
          n("delivered"), n("outboxed"), el("td", { class: r.outbox_messages ? "bad" : "" }, fmtNum(r.outbox_messages)),
          el("td", null, r.outbox_oldest_age_seconds ? duration(r.outbox_oldest_age_seconds * 1000) : "–"),
          n("dropped", true), n("rejected", true), n("refused", true));
      }));
    }
    const req = $("health-requests");
    const rhead = el("tr", null, ...["endpoint", "2xx", "4xx", "5xx"].map((t) => el("th", null, t)));
    req.replaceChildren(rhead, ...(h.requests.length ? h.requests.map((r) =>
      el("tr", null, el("td", { class: "mono" }, r.route.replace("{$}", "")), el("td", null, fmtNum(r.by_class["2xx"] || 0)),
        el("td", { class: r.by_class["4xx"] ? "bad" : "" }, fmtNum(r.by_class["4xx"] || 0)),
        el("td", { class: r.by_class["5xx"] ? "bad" : "" }, fmtNum(r.by_class["5xx"] || 0)))) :
      [el("tr", null, el("td", { colspan: "4", class: "l muted" }, "Nothing posted since the bridge started."))]));
    setConn("live", "live");
  }
  return { show() { listen(null); refresh(); }, tick: refresh, tickEvery: 2000 };
})();

// ---- routing ---------------------------------------------------------------

function route() {
  const [name, qs] = (location.hash.slice(1) || "fleet").split("?");
  const view = views[name] ? name : "fleet";
  if (!info.available && view !== "health") {
    if (view !== "health") { location.hash = "#health"; return; }
  }
  for (const s of document.querySelectorAll(".view")) s.hidden = s.id !== "view-" + view;
  for (const a of document.querySelectorAll(".tabs a")) a.classList.toggle("on", a.dataset.view === view);
  document.title = "firehose · " + view;
  if (current === view && name === "stream") return;
  current = view;
  views[view].show(new URLSearchParams(qs || ""));
}

async function main() {
  // The empty states' examples address this bridge as the browser reaches it.
  for (const o of document.querySelectorAll(".origin")) o.textContent = location.origin;
  try {
    info = await getJSON("api/v1/info");
  } catch (e) {
    info = { available: false, unavailable: "the bridge did not answer: " + e.message, filters: {} };
  }
  if (!info.available) {
    const b = $("banner");
    b.textContent = info.unavailable || "This bridge shows no bus data.";
    b.hidden = false;
    for (const a of document.querySelectorAll(".tabs a")) if (a.dataset.view !== "health") a.hidden = true;
  }
  window.addEventListener("hashchange", route);
  // A hidden page lets go of its stream: a browser allows six connections
  // to one HTTP/1.1 server, and each open page holds one. It catches up
  // (snapshot, then stream) when it is shown again.
  document.addEventListener("visibilitychange", () => {
    if (document.hidden) {
      if (source) { source.close(); source = null; setConn("connecting", "paused while hidden"); }
    } else if (current && views[current]) {
      views[current].show(new URLSearchParams((location.hash.split("?")[1]) || ""));
    }
  });
  route();
  // Relative times and polled views move on without any message.
  let ticks = 0;
  setInterval(() => {
    ticks++;
    const v = views[current];
    if (!v || !v.tick) return;
    if (v.tickEvery ? (ticks * 1000) % v.tickEvery === 0 : ticks % 10 === 0) v.tick();
  }, 1000);
}

main();
