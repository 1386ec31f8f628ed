// berth console: one page, routed by the hash; its data from /api/, refreshed when the
// server's stream says the fleet changed (at most one request in flight per page).
// Every text is set as text (never as HTML): what etcd holds cannot become markup.
"use strict";

const state = { version: -1, loaded: 0, etcdLost: null, streamOk: false, busy: false,
                again: false, route: null, chart: null, asOf: null, needToken: false };
// BERTH (/vocabulary.js): the words berth's documents use, made from its enums
const ONLINE = BERTH.reachability.ONLINE;

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function headers(extra) {
  const token = sessionStorage.getItem("berth-token");
  return Object.assign(token ? { Authorization: "Bearer " + token } : {}, extra || {});
}

async function api(path, options) {
  const opts = Object.assign({}, options || {});
  opts.headers = headers(opts.headers);
  const r = await fetch(path, opts);
  if (r.status === 401) {
    needToken();
    throw new Error("this console needs its bearer token");
  }
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  document.getElementById("login").hidden = true;
  state.needToken = false;
  return body;
}

function ago(seconds) {
  if (seconds < 60) return Math.max(0, Math.round(seconds)) + " s";
  if (seconds < 3600) return Math.round(seconds / 60) + " min";
  return (seconds / 3600).toFixed(1) + " h";
}

function stateBadge(s) { return h("span", { class: "state " + s }, s || "-"); }

function table(head, rows, attrs) {
  return h("table", attrs || {}, h("thead", {}, h("tr", {}, head.map((c) => h("th", {}, c)))),
           h("tbody", {}, rows));
}

// -- freshness: how old the view is, whether etcd answers, whether updates arrive --------

// No token yet (or a wrong one): the login form says so; updates are not "lost".
function needToken() {
  state.needToken = true;
  document.getElementById("login").hidden = false;
  showFreshness();
}

function showFreshness() {
  const el = document.getElementById("freshness");
  const banner = document.getElementById("banner");
  const age = state.loaded ? (Date.now() - state.loaded) / 1000 : 0;
  const stale = !state.needToken && (!state.streamOk || state.etcdLost !== null);
  el.textContent = (state.needToken ? "waiting for the bearer token" :
    state.streamOk ? "live" : "updates lost, retrying") +
    (state.loaded ? " · as of " + ago(age) + " ago" : "");
  el.classList.toggle("stale", stale);
  if (state.etcdLost !== null) {
    const since = (Date.now() / 1000 - state.etcdLost);
    banner.textContent = "etcd does not answer (for " + ago(since) +
      "): this is the last view the console had, " + ago(age) + " old.";
    banner.hidden = false;
  } else {
    banner.hidden = true;
  }
}
setInterval(showFreshness, 1000);

// -- the stream ------------------------------------------------------------------------

async function listen() {
  for (;;) {
    try {
      const r = await fetch("/api/stream", { headers: headers() });
      if (r.status === 401) { needToken(); throw new Error("401"); }
      const reader = r.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      state.streamOk = true;
      state.needToken = false;
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const message = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          const data = message.split("\n").filter((l) => l.startsWith("data:"))
            .map((l) => l.slice(5)).join("\n");
          if (!data) continue;
          const said = JSON.parse(data);
          state.etcdLost = said.etcd_lost_since;
          if (said.version !== state.version) refresh();
          else if (!state.busy) state.loaded = Date.now(); // nothing changed: still current
        }
      }
    } catch (e) { /* retried below */ }
    state.streamOk = false;
    showFreshness();
    await new Promise((res) => setTimeout(res, 2000));
  }
}

// -- routing and refreshing --------------------------------------------------------------

function route() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  const page = parts[0] || "fleet";
  return { page, args: parts.slice(1) };
}

async function refresh() {
  if (state.busy) { state.again = true; return; }
  state.busy = true;
  try {
    do {
      state.again = false;
      const r = route();
      const render = PAGES[r.page];
      if (!render) { setPage(h("p", { class: "error" }, "no page " + r.page)); break; }
      try {
        const data = await render.load(r.args);
        if (data === null) break;
        state.version = data.version;
        state.etcdLost = data.etcd_lost_since ? Date.parse(data.etcd_lost_since) / 1000 : state.etcdLost;
        state.loaded = data.as_of ? Date.parse(data.as_of) : Date.now();
        // Drawn again only when what it shows changed (not for another part of the
        // fleet): a button stays where it is while nothing about it changes.
        const shown = JSON.stringify(Object.assign({}, data, { version: 0, as_of: "" }));
        if (shown === state.shown && r.page === state.shownPage) continue;
        state.shown = shown; state.shownPage = r.page;
        render.show(data, r.args);
      } catch (e) {
        if (state.needToken) {  // the login form says it: the page waits for it, no error
          setPage(h("p", { class: "muted" }, "This page shows once the token is given above."));
          break;
        }
        const old = document.getElementById("page-error");
        if (old) old.remove();
        document.getElementById("page").prepend(h("p", { id: "page-error", class: "error" }, String(e.message || e)));
      }
    } while (state.again);
  } finally {
    state.busy = false;
    showFreshness();
  }
}

function fill(el, ...children) {
  el.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
}

function setPage(...children) { fill(document.getElementById("page"), ...children); }

function navigate() {
  const r = route();
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", a.dataset.page === r.page ||
    (r.page === "application" && a.dataset.page === "applications"));
  state.version = -1;
  state.shown = null;
  if (state.chart) { state.chart.destroy(); state.chart = null; }
  setPage(h("p", { class: "muted" }, "loading…"));
  refresh();
}

// -- fleet -------------------------------------------------------------------------------

function bar(c, res) {
  // One element a bar: requested, then assumed, over what the cluster can allocate.
  const a = c.capacity[res];
  if (!a) return "-";
  const pct = (x) => Math.min(100, (100 * x) / a.allocatable);
  const req = pct(a.requested), ass = Math.min(100, req + pct(a.assumed));
  const fmt = res === "memory" ? (x) => (x / 2 ** 30).toFixed(1) + "Gi" :
    res === "cpu" ? (x) => (x / 1000).toFixed(1) : (x) => String(Math.round(x));
  return h("div", { class: "bar", title: res + ": requested " + fmt(a.requested) + ", assumed " + fmt(a.assumed) +
                    " of " + fmt(a.allocatable),
                    style: "background:linear-gradient(to right,var(--req) " + req + "%,var(--assumed) " + req +
                      "%,var(--assumed) " + ass + "%,#f3f4f6 " + ass + "%)" },
    fmt(a.requested) + "+" + fmt(a.assumed) + "/" + fmt(a.allocatable));
}

const fleetPage = {
  async load() {
    const group = sessionStorage.getItem("berth-group") || "";
    return api("/api/fleet?group=" + encodeURIComponent(group));
  },
  show(d) {
    const select = h("select", { id: "group-by", onchange: (e) => {
      sessionStorage.setItem("berth-group", e.target.value); refresh(); } },
      h("option", { value: "" }, "(no grouping)"),
      d.labels.map((l) => h("option", { value: l, selected: l === d.group_by }, l)));
    const counts = Object.entries(d.states).map(([s, n]) => h("span", {}, stateBadge(s), " " + n + "  "));
    const groups = d.groups.map((g) => [
      g.group !== "" ? h("h2", {}, d.group_by + " = " + g.group + " (" + g.clusters.length + ")") : null,
      table(["CLUSTER", "STATE", "LABELS", "CPU", "MEMORY", "PODS", "METRICS (value → score × weight)"],
        g.clusters.map((c) => h("tr", { class: c.state === ONLINE ? "" : "down", "data-cluster": c.name },
          h("td", {}, c.namespace + "/", h("b", {}, c.name)),
          h("td", { title: c.reason }, stateBadge(c.state), c.state !== ONLINE ? h("div", { class: "muted" }, c.reason) : null),
          h("td", {}, Object.entries(c.labels).map(([k, v]) => h("span", { class: "chip" }, k + "=" + v)),
            c.taints.map((t) => h("span", { class: "chip taint" }, t))),
          h("td", {}, bar(c, "cpu")), h("td", {}, bar(c, "memory")), h("td", {}, bar(c, "pods")),
          h("td", { class: "metrics" }, c.metrics.map((m) => m.value === null ?
            h("div", { class: "error" }, m.name + ": " + (m.error || "-")) :
            m.name + ": " + m.value + " \u2192 " + (m.normalized === null ? "-" : m.normalized.toFixed(3)) + " \u00d7 " + m.weight + "\n"))))),
    ]);
    setPage(h("h1", {}, "Fleet: " + d.count + " clusters"),
      h("div", { class: "filters" }, h("label", {}, "group by ", select), h("span", {}, counts)), groups);
  },
};

// -- applications ------------------------------------------------------------------------

const appFilters = { namespace: "", labels: "", state: "", offset: 0 };

const appsPage = {
  async load() {
    const q = new URLSearchParams(appFilters);
    return api("/api/applications?" + q.toString());
  },
  show(d) {
    // The filters are drawn once per visit (and when the namespaces change): a refresh
    // while someone types in them must not take their text or focus away.
    let filters = document.getElementById("apps-filters");
    if (!filters || filters.dataset.namespaces !== d.namespaces.join(",")) {
      const keep = (field) => (e) => { appFilters[field] = e.target.value; appFilters.offset = 0; refresh(); };
      filters = h("div", { class: "filters", id: "apps-filters", "data-namespaces": d.namespaces.join(",") },
        h("label", {}, "namespace ", h("select", { id: "f-namespace", onchange: keep("namespace") },
          h("option", { value: "" }, "(all)"), d.namespaces.map((n) => h("option", { value: n, selected: n === appFilters.namespace }, n)))),
        h("label", {}, "labels ", h("input", { id: "f-labels", value: appFilters.labels, placeholder: "tier=web,!canary", onchange: keep("labels") })),
        h("label", {}, "state ", h("select", { id: "f-state", onchange: keep("state") }, h("option", { value: "" }, "(any)"),
          BERTH.filterStates.map((s) =>
            h("option", { value: s, selected: s === appFilters.state }, s)))));
      setPage(h("h1", { id: "apps-title" }), filters, h("div", { id: "apps-body" }));
    }
    const rows = d.rows.map((a) => h("tr", { "data-app": a.namespace + "/" + a.name },
      h("td", {}, a.namespace), h("td", {}, h("a", { href: "#/application/" + encodeURIComponent(a.namespace) + "/" + encodeURIComponent(a.name) }, a.name)),
      h("td", {}, stateBadge(a.placement)), h("td", {}, stateBadge(a.state)), h("td", { class: "num" }, a.ready),
      h("td", { class: "clusters" }, a.clusters.join(", ") || "-"), h("td", {}, a.reason || "-"), h("td", {}, a.age)));
    const more = d.matched > d.offset + d.rows.length;
    document.getElementById("apps-title").textContent = "Applications: " + d.total;
    fill(document.getElementById("apps-body"), 
      h("p", {}, h("span", { class: "muted", id: "shown" }, "showing " + (d.rows.length ? d.offset + 1 : 0) + "\u2013" + (d.offset + d.rows.length) + " of " + d.matched + " "),
        d.offset > 0 ? h("button", { onclick: () => { appFilters.offset = Math.max(0, d.offset - 500); refresh(); } }, "previous") : null,
        more ? h("button", { onclick: () => { appFilters.offset = d.offset + 500; refresh(); } }, "next") : null),
      table(["NAMESPACE", "NAME", "PLACEMENT", "STATE", "READY", "CLUSTERS", "REASON", "AGE"], rows, { id: "apps" }));
  },
};

// -- one application ---------------------------------------------------------------------

async function act(path, body) {
  const out = document.getElementById("act-result");
  try {
    const r = await api(path, { method: "POST", body: body ? JSON.stringify(body) : null,
                                headers: { "Content-Type": "application/json" } });
    out.className = "muted"; out.textContent = r.done;
  } catch (e) { out.className = "error"; out.textContent = e.message; }
  refresh();
}

const appPage = {
  async load(args) {
    return api("/api/applications/" + encodeURIComponent(args[0]) + "/" + encodeURIComponent(args[1]));
  },
  show(d) {
    const base = "/api/applications/" + encodeURIComponent(d.namespace) + "/" + encodeURIComponent(d.name) + "/rollout/";
    const dec = d.decision;
    const ro = d.rollout;
    const kept = document.getElementById("act-result");
    const parts = [h("h1", {}, "Application " + d.namespace + "/" + d.name + " (generation " + d.generation + ")"),
      (d.problems || []).map((p) => h("p", { class: "error" }, p))];
    if (dec) {
      parts.push(h("p", { id: "decision" }, stateBadge(dec.state), " on ",
        h("b", { id: "targets" }, dec.targets.map((t) => t.name + (t.replicas !== null ? "=" + t.replicas : "")).join(", ") || "nowhere"),
        " — " + dec.reason, h("div", { class: "muted" }, dec.decided),
        h("div", { class: "muted", id: "priority" }, "priority: " + dec.priority)));
      if (dec.room.length)
        parts.push(h("pre", { id: "room" }, dec.room.join("\n")));
      parts.push(h("h2", {}, "Why here (berth explain)"),
        table(dec.ranked.head, dec.ranked.rows.map((r) => h("tr", {}, r.map((c, i) => h("td", { class: i === 1 || i === 2 ? "num" : "" }, c)))), { id: "explain-ranked" }));
      if (dec.rejected.rows.length)
        parts.push(table(dec.rejected.head, dec.rejected.rows.map((r) => h("tr", {}, r.map((c) => h("td", {}, c)))), { id: "explain-rejected" }));
    } else {
      parts.push(h("p", { class: "muted" }, "not scheduled yet (no Binding)"));
    }
    const health = (d.health || []).map((c) => h("tr", { "data-cluster": c.cluster },
      h("td", {}, c.cluster), h("td", { class: "num" }, c.generation), h("td", {}, stateBadge(c.health), c.reason ? " " + c.reason : ""),
      h("td", { class: "num" }, c.ready), h("td", {}, c.since ? c.since.replace("T", " ").slice(0, 19) : "-")));
    const buttons = [];
    if (ro.awaiting_approval) buttons.push(h("button", { id: "approve", onclick: () => act(base + "approve", { stage: ro.awaiting_approval }) }, "Approve stage " + ro.awaiting_approval));
    // Pause and Resume where there is something to pause or resume: a rollout under way,
    // or a pause still on (resumed, the next rollout is not held)
    if (ro.paused) buttons.push(h("button", { id: "resume", onclick: () => act(base + "resume") }, "Resume"));
    else if (BERTH.underWay.includes(ro.phase)) buttons.push(h("button", { id: "pause", onclick: () => act(base + "pause") }, "Pause"));
    const actResult = kept || h("span", { id: "act-result", class: "muted" });
    parts.push(h("div", { class: "grid2" },
      h("div", {}, h("h2", {}, "Health per cluster"),
        d.status ? h("p", {}, stateBadge(d.status.state), " " + (d.status.reason || "")) : h("p", { class: "muted" }, "not applied yet"),
        table(["CLUSTER", "GEN", "HEALTH", "READY", "SINCE"], health, { id: "health" })),
      h("div", { id: "rollout" }, h("h2", {}, "Rollout (" + ro.strategy + ")"),
        h("p", {}, (ro.phase || "no rollout recorded") + (ro.stage ? " at stage " + ro.stage : "") + (ro.reason ? ": " + ro.reason : "") + (ro.paused ? " (paused)" : "")),
        h("p", {}, buttons, " ", actResult),
        ro.report ? h("pre", {}, ro.report) : null)));
    const timeline = (d.ledger || []).slice().reverse().map((r) => h("li", { class: r.event, "data-id": r.id },
      h("time", { datetime: r.time }, r.time.replace("T", " ").slice(0, 19)),
      h("b", {}, r.event), " (" + r.by + ") ", r.what, r.why !== "-" ? h("span", { class: "muted" }, " · " + r.why) : null,
      Object.keys(r.values).length ? h("div", { class: "muted" }, "measured then (as the provider gave them, before normalizing): " +
        Object.entries(r.values).map(([c, ms]) =>
        c + ": " + Object.entries(ms).map(([m, v]) => m + "=" + v).join(" ")).join("; ")) : null));
    parts.push(h("h2", {}, "Ledger (newest first)"),
      (d.ledger_problems || []).map((p) => h("p", { class: "error" }, p)),
      timeline.length ? h("ul", { class: "timeline", id: "ledger" }, timeline) : h("p", { class: "muted" }, "no records"));
    parts.push(h("h2", {}, "Events"), table(["TYPE", "REASON", "COUNT", "LAST", "MESSAGE"],
      (d.events || []).slice().reverse().map((e) => h("tr", {}, h("td", {}, e.type), h("td", {}, e.reason), h("td", { class: "num" }, e.count),
        h("td", {}, e.last.replace("T", " ").slice(0, 19)), h("td", {}, e.message))), { id: "events" }));
    setPage(...parts);
  },
};

// -- metrics over time -------------------------------------------------------------------

const chosenMetrics = new Set();

const metricsPage = {
  async load() { return api("/api/metrics"); },
  show(d) {
    if (!chosenMetrics.size) d.series.slice(0, 8).forEach((s) => chosenMetrics.add(s.key));
    const picks = d.series.map((s) => h("label", { class: "chip" }, h("input", { type: "checkbox", checked: chosenMetrics.has(s.key),
      onchange: (e) => { if (e.target.checked) chosenMetrics.add(s.key); else chosenMetrics.delete(s.key); state.shown = null; refresh(); } }),
      " " + s.metric + (s.clusters.length ? " (" + s.clusters.join(", ") + ")" : "")));
    const shown = d.series.filter((s) => chosenMetrics.has(s.key));
    const chartBox = h("div", { class: "chart", id: "chart" });
    const moves = table(["TIME", "APPLICATION", "FROM", "TO", "DECISION"], d.moves.slice().reverse().slice(0, 50).map((m) =>
      h("tr", {}, h("td", {}, new Date(m.at * 1000).toISOString().replace("T", " ").slice(0, 19)),
        h("td", {}, h("a", { href: "#/application/" + m.application }, m.application)),
        h("td", {}, m.from.join(", ")), h("td", {}, m.to.join(", ")), h("td", { class: "muted" }, m.decision))), { id: "moves" });
    const deferred = d.deferred.length ? table(["APPLICATION", "STARTS", "WHY"], d.deferred.map((x) =>
      h("tr", {}, h("td", {}, x.application),
        h("td", {}, x.start ? new Date(x.start * 1000).toISOString().replace("T", " ").slice(0, 16) : "-"),
        h("td", {}, x.reason))), { id: "deferred" }) : h("p", { class: "muted" }, "none");
    setPage(h("h1", {}, "Metrics over time"), h("div", { class: "filters" }, picks), chartBox,
      d.problem ? h("p", { class: "error", id: "history-problem" }, d.problem) : null,
      h("p", { class: "muted", id: "history-source" }, "Values from " + d.source + "; dashed: forecasts; vertical lines: moves (amber), deferred applications' planned starts (green)."),
      h("h2", {}, "Moves seen"), moves, h("h2", {}, "Deferred applications (planned starts)"), deferred);
    draw(chartBox, shown, d.moves, d.deferred.filter((x) => x.start).map((x) => x.start));
  },
};

function draw(box, series, moves, starts) {
  if (state.chart) { state.chart.destroy(); state.chart = null; }
  if (!series.length || typeof uPlot === "undefined") { box.append(h("p", { class: "muted" }, "no metric chosen")); return; }
  const now = Date.now() / 1000;
  const times = new Set([now]);
  for (const s of series) { s.points.forEach((p) => times.add(p[0])); s.forecast.forEach((p) => times.add(p[0])); }
  for (const m of moves) times.add(m.at);
  for (const t of starts) times.add(t);
  const xs = Array.from(times).sort((a, b) => a - b);
  if (xs.length < 2) { box.append(h("p", { class: "muted" }, "no values yet")); return; }
  // A value holds until the next one (a step line): a measured one until now, a
  // forecast one until its last point.
  const stepAt = (points, until) => {
    const out = []; let i = 0, last = null;
    for (const x of xs) { while (i < points.length && points[i][0] <= x) { last = points[i][1]; i++; }
      out.push(points.length && x >= points[0][0] && x <= until ? last : null); }
    return out;
  };
  const palette = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#4b5563", "#db2777"];
  const data = [xs], opts = [{}];
  series.forEach((s, i) => {
    const color = palette[i % palette.length];
    data.push(stepAt(s.points, now)); opts.push({ label: s.metric, stroke: color, width: 2, paths: uPlot.paths.stepped({ align: 1 }) });
    if (s.forecast.length) { data.push(stepAt(s.forecast, s.forecast[s.forecast.length - 1][0])); opts.push({ label: s.metric + " (forecast)", stroke: color, dash: [6, 4], width: 1, paths: uPlot.paths.stepped({ align: 1 }) }); }
  });
  const lines = (u, times, color) => {
    const ctx = u.ctx; ctx.save(); ctx.strokeStyle = color; ctx.lineWidth = 1.5; ctx.setLineDash([3, 3]);
    for (const t of times) { const x = u.valToPos(t, "x", true); if (x < u.bbox.left || x > u.bbox.left + u.bbox.width) continue;
      ctx.beginPath(); ctx.moveTo(x, u.bbox.top); ctx.lineTo(x, u.bbox.top + u.bbox.height); ctx.stroke(); }
    ctx.restore();
  };
  const plugin = { hooks: { draw: [(u) => { lines(u, moves.map((m) => m.at), "#f59e0b"); lines(u, starts, "#16a34a"); }] } };
  state.chart = new uPlot({ width: Math.max(400, box.clientWidth - 16), height: 320, series: opts, plugins: [plugin],
                            scales: { x: { time: true } } }, data, box);
}

// -- what-if -----------------------------------------------------------------------------

const whatIfPage = {
  async load() { return null; },
  show() {},
};

function whatIfForm() {
  const text = h("textarea", { id: "whatif-yaml", rows: 16, placeholder: "api: kubernetes\nkind: Application\nmetadata: …" });
  const file = h("input", { type: "file", accept: ".yaml,.yml,.json", onchange: async (e) => {
    if (e.target.files.length) text.value = await e.target.files[0].text(); } });
  const out = h("div", { id: "whatif-result" });
  const run = async () => {
    fill(out, h("p", { class: "muted" }, "deciding as the leading scheduler would…"));
    try {
      const r = await api("/api/what-if", { method: "POST", body: text.value, headers: { "Content-Type": "application/yaml" } });
      fill(out, h("p", { class: "muted" }, "decided with " + r.config + " in " + r.seconds + " s; nothing was written"),
        r.answers.map((a) => [h("h2", {}, "Application " + a.application + (a.exists ? " (stored)" : " (not stored)")),
          h("p", { class: "answer", "data-app": a.application }, stateBadge(a.state), " on ", h("b", { class: "targets" }, a.targets.join(", ") || "nowhere"), a.reason ? " — " + a.reason : ""),
          table(["CANDIDATE", "VERDICT", "SCORE", "BREAKDOWN / WHY"], a.verdicts.map((v) => h("tr", {},
            h("td", {}, v.candidate), h("td", {}, v.verdict === "rejected" ? "rejected by " + v.rejected_by : v.verdict),
            h("td", { class: "num" }, v.score === null ? "-" : v.score.toFixed(4)),
            h("td", {}, v.verdict === "rejected" ? v.reason + (v.actual ? "; it has " + v.actual : "") :
              Object.entries(v.scores).map(([k, x]) => k + "=" + x.toFixed(4)).join(" ")))))]),
        h("h2", {}, "Stored applications that would move: " + (r.consequences.length || "none")),
        r.consequences.length ? table(["APPLICATION", "NOW", "THEN", "WHY"], r.consequences.map((c) => h("tr", {},
          h("td", {}, c.application), h("td", {}, c.now.join(", ") || "-"), h("td", {}, c.then.join(", ") || "nowhere"), h("td", {}, c.reason))), { id: "consequences" }) : null);
    } catch (e) { fill(out, h("p", { class: "error" }, e.message)); }
  };
  setPage(h("h1", {}, "What if"), h("p", { class: "muted" }, "Paste or upload applications (or any document berth apply takes): each is decided as the leading scheduler would now, and the stored applications they would move are listed. Nothing is written."),
    text, h("p", {}, file, " ", h("button", { id: "whatif-run", onclick: run }, "Decide")), out);
}

const PAGES = { fleet: fleetPage, applications: appsPage, application: appPage, metrics: metricsPage, "what-if": whatIfPage };

document.getElementById("login").addEventListener("submit", (e) => {
  e.preventDefault();
  sessionStorage.setItem("berth-token", document.getElementById("token").value.trim());
  document.getElementById("token").value = "";
  document.getElementById("login").hidden = true;
  navigate();
});
window.addEventListener("hashchange", () => { if (route().page === "what-if") { whatIfForm(); markNav(); } else navigate(); });
function markNav() { for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", a.dataset.page === route().page); }
if (route().page === "what-if") { whatIfForm(); markNav(); } else navigate();
listen();
