// Live pages: agents and workers, a job's watch view, and alerts.
import * as api from "./api.js";
import {h, clear, put, ns, ms, pct, count, rankList, table, when, agentClock} from "./format.js";
import {xyChart, emptyChart, STRAGGLER_COLOR} from "./charts.js";
import {panel, every, errorBox, status} from "./widgets.js";

// A sharded coordinator's replicas that did not answer: the list lacks what they hold.
export function unreachableNote(shards) {
  if (!shards || !shards.size) return null;
  return h("p", {class: "error", role: "alert"}, `Not shown: what coordinator replicas ${[...shards].join(", ")} hold ` +
    "(they did not answer). Their agents and captures are missing from this list; check those replicas.");
}

function healthBadge(health) {
  const kind = {healthy: "good", connected: "good", disconnected: "bad", degraded: "warn", stale: "warn"}[health] || "neutral";
  return h("span", {class: `badge ${kind}`}, health);
}

// Every page of /v1/workers (a bounded number of them).
async function allWorkers(job) {
  const out = {agents: [], workers: [], connected_agents: 0, disconnected_agents: 0, unreachable: new Set()};
  let after = "";
  for (let page = 0; page < 50; ++page) {
    const q = new URLSearchParams({limit: "10000"});
    if (job) q.set("job", job);
    if (after) q.set("after", after);
    const r = await api.get(`/v1/workers?${q}`, "list the workers");
    out.agents.push(...r.agents);
    out.workers.push(...r.workers);
    out.connected_agents = r.connected_agents;
    out.disconnected_agents = r.disconnected_agents;
    for (const shard of r.unreachable_shards || []) out.unreachable.add(shard);
    if (!r.next) break;
    after = r.next;
  }
  return out;
}

function jobsOf(workers) {
  const jobs = new Map();
  for (const w of workers) {
    if (!jobs.has(w.job)) jobs.set(w.job, {job: w.job, ranks: [], hosts: new Set(), world: w.world_size});
    const j = jobs.get(w.job);
    j.ranks.push(w.rank);
    j.hosts.add(w.host);
  }
  return [...jobs.values()].sort((a, b) => a.job.localeCompare(b.job));
}

export function workersPage(main) {
  main.append(h("h1", {}, "Agents and workers"));
  const holder = h("div");
  main.append(holder);
  let first = true;
  return every(5000, async () => {
    let data;
    try {
      data = await allWorkers("");
    } catch (e) {
      put(holder, errorBox(e));
      return;
    }
    const jobs = jobsOf(data.workers);
    const agentJobs = new Map();
    for (const w of data.workers) {
      if (!agentJobs.has(w.agent_id)) agentJobs.set(w.agent_id, new Map());
      const m = agentJobs.get(w.agent_id);
      if (!m.has(w.job)) m.set(w.job, []);
      m.get(w.job).push(w.rank);
    }
    put(holder, 
      h("p", {class: "muted"}, `${count(data.connected_agents)} connected agents, ${count(data.workers.length)} workers` +
        (data.disconnected_agents ? `; ${data.disconnected_agents} disconnected` : "") + ". Refreshed every 5 s."),
      unreachableNote(data.unreachable),
      h("section", {class: "panel"}, h("h2", {}, "Jobs"),
        jobs.length === 0 ? h("p", {}, "No agent serves a job yet. Start agents on the training nodes (docs/deploy.md).")
          : table([
            {label: "job", value: (j) => j.job},
            {label: "ranks", value: (j) => rankList(j.ranks)},
            {label: "workers", num: true, value: (j) => count(j.ranks.length)},
            {label: "world", num: true, value: (j) => j.world},
            {label: "hosts", num: true, value: (j) => j.hosts.size},
            {label: "", value: (j) => h("span", {class: "row"},
              h("a", {href: `#/watch/${encodeURIComponent(j.job)}`}, "watch"),
              h("a", {href: `#/capture-new/${encodeURIComponent(j.job)}`}, "capture"))},
          ], jobs, {label: "jobs"})),
      h("section", {class: "panel"}, h("h2", {}, "Agents"),
        table([
          {label: "agent", value: (a) => a.agent_id},
          {label: "host", value: (a) => a.host},
          {label: "health", value: (a) => healthBadge(a.health)},
          {label: "workers", num: true, value: (a) => a.workers},
          {label: "its clock", num: true, value: (a) => agentClock(a.clock).offset},
          {label: "drift", num: true, value: (a) => agentClock(a.clock).drift},
          {label: "correction", num: true, value: (a) => a.clock ? ns(a.clock.offset_ns) : "–"},
          {label: "bound", num: true, value: (a) => a.clock ? "±" + ns(a.clock.error_bound_ns) : "–"},
          {label: "jobs: ranks", value: (a) => [...(agentJobs.get(a.agent_id) || new Map())].map(([j, r]) => `${j}: ${rankList(r)}`).join("; ")},
          {label: "last seen", num: true, value: (a) => `${(a.last_seen_ms_ago / 1000).toFixed(1)} s ago`},
        ], data.agents, {label: "agents", rowClass: (a) => a.health === "disconnected" ? "muted" : null})));
    if (first) status(`${data.agents.length} agents`);
    first = false;
  });
}

// A job's watch window, polled; the history is what this page has seen since it opened.
export function watchPage(main, job) {
  main.append(h("h1", {}, job ? `Watch: ${job}` : "Watch"));
  if (!job) {
    main.append(panel("Pick a job", async () => {
      const jobs = jobsOf((await allWorkers("")).workers);
      if (!jobs.length) return h("p", {}, "No agent serves a job yet.");
      return h("ul", {}, jobs.map((j) => h("li", {}, h("a", {href: `#/watch/${encodeURIComponent(j.job)}`}, j.job),
        ` (${count(j.ranks.length)} ranks)`)));
    }));
    return null;
  }
  const facts = h("div");
  const alerts = h("div");
  const charts = h("div", {class: "grid2"});
  const ranksTable = h("div");
  main.append(
    h("p", {class: "muted"}, "Every rank's step summaries, streamed by the agents between captures; refreshed every 2 s. ",
      h("a", {href: `#/capture-new/${encodeURIComponent(job)}`}, "Capture this job now.")),
    h("section", {class: "panel"}, h("h2", {}, "Alerts firing"), alerts),
    h("section", {class: "panel"}, h("h2", {}, "Window"), facts),
    charts,
    h("section", {class: "panel"}, h("h2", {}, "Ranks in the window"), ranksTable));
  const history = [];  // {t, step_time_ms, ranks: Map rank -> {lag_ms, caused_delay_ms, step_time_ms}}
  const started = Date.now();
  return every(2000, async () => {
    let window, firing;
    try {
      [window, firing] = await Promise.all([
        api.get(`/v1/watch/jobs/${encodeURIComponent(job)}`, `watch job ${job}`),
        api.get(`/v1/alerts?state=firing&job=${encodeURIComponent(job)}`, "list alerts"),
      ]);
    } catch (e) {
      put(facts, errorBox(e));
      return;
    }
    const t = (Date.now() - started) / 1000;
    history.push({t, step_time_ms: window.step_time_ms,
      ranks: new Map(window.ranks.map((r) => [r.rank, r]))});
    if (history.length > 300) history.shift();
    const flagged = new Set(firing.alerts.flatMap((a) => a.ranks || []));
    put(alerts, firing.alerts.length ? firing.alerts.map(alertCard) : h("p", {class: "muted"}, "None."));
    put(facts, h("dl", {class: "facts"},
      h("dt", {}, "steps"), h("dd", {}, `${window.first_step} – ${window.last_step}${window.absent_ranks && window.absent_ranks.length ? ` (ranks ${rankList(window.absent_ranks)} not reporting: the other alerts wait for them)` : window.full ? "" : " (window filling)"}`),
      h("dt", {}, "job step time"), h("dd", {}, ms(window.step_time_ms)),
      h("dt", {}, "ranks"), h("dd", {}, count(window.ranks.length))));
    // The ranks worth a line: those that caused delay, most first, and the flagged ones.
    const worst = [...window.ranks].sort((a, b) => b.caused_delay_ms - a.caused_delay_ms)
      .filter((r) => r.caused_delay_ms > 0 || flagged.has(r.rank)).slice(0, 6);
    const palette = [STRAGGLER_COLOR, "#1a56b0", "#e08a2c", "#5a9e5a", "#8a62b5", "#555"];
    const line = (field) => worst.map((r, i) => ({
      label: `rank ${r.rank}${flagged.has(r.rank) ? " (alert)" : ""}`, color: palette[i], dash: i % 2 ? "5 3" : null,
      points: history.filter((s) => s.ranks.has(r.rank)).map((s) => [s.t, s.ranks.get(r.rank)[field]])}));
    put(charts, 
      h("section", {class: "panel"}, xyChart({title: "Job step time over time", xLabel: "seconds since this page opened",
        yLabel: "ms", yFormat: (v) => v.toFixed(0), xFormat: (v) => v.toFixed(0),
        series: [{label: "median step time", color: "#1a56b0", points: history.map((s) => [s.t, s.step_time_ms])}]})),
      // With no rank to draw, a sentence: a chart of zeros would draw axes of "0 ms" ticks.
      h("section", {class: "panel"}, worst.length ? xyChart({title: "Caused delay in the window, per rank", xLabel: "seconds since this page opened",
        yLabel: "ms", yFormat: (v) => v.toFixed(0), xFormat: (v) => v.toFixed(0), series: line("caused_delay_ms")})
        : emptyChart("Caused delay in the window, per rank", "No rank caused delay in this window: every rank arrived with the others.")),
      h("section", {class: "panel"}, worst.length ? xyChart({title: "Lag behind the median arrival, per rank", xLabel: "seconds since this page opened",
        yLabel: "", yFormat: (v) => (Math.abs(v) < 1 ? (v * 1000).toFixed(0) + " µs" : v.toFixed(1) + " ms"), xFormat: (v) => v.toFixed(0),
        series: line("lag_ms")})
        : emptyChart("Lag behind the median arrival, per rank", "No rank lags the others in this window.")));
    const rows = [...window.ranks].sort((a, b) => b.caused_delay_ms - a.caused_delay_ms || a.rank - b.rank);
    put(ranksTable, table([
      {label: "rank", value: (r) => r.rank},
      {label: "host", value: (r) => r.host},
      {label: "steps", num: true, value: (r) => r.steps},
      {label: "step time", num: true, value: (r) => ms(r.step_time_ms)},
      {label: "lag", num: true, value: (r) => ms(r.lag_ms)},
      {label: "caused delay", num: true, value: (r) => ms(r.caused_delay_ms)},
      {label: "last to arrive", num: true, value: (r) => pct(r.last_arriver_share)},
    ], rows.slice(0, 200), {label: "ranks", rowClass: (r) => flagged.has(r.rank) ? "straggler" : null,
      caption: rows.length > 200 ? `the 200 ranks that caused most delay, of ${count(rows.length)}` : null}));
  });
}

// Evidence sections the user opened stay open across refreshes (cards are rebuilt each time).
const openEvidence = new Set();

function alertCard(a) {
  const ev = a.evidence || {};
  const facts = Object.entries(ev).filter(([k, v]) => typeof v !== "object")
    .map(([k, v]) => [h("dt", {}, k.replaceAll("_", " ")), h("dd", {}, typeof v === "number" ? +v.toFixed(4) : String(v))]);
  return h("article", {class: "alert-card" + (a.state === "resolved" ? " resolved" : ""), "aria-label": `alert ${a.rule}`},
    h("div", {class: "row"}, h("span", {class: `badge ${a.state === "firing" ? "bad" : "good"}`}, a.state),
      h("strong", {}, `${a.rule}: ${a.subject}`), h("span", {class: "muted"}, `job ${a.job}`)),
    h("p", {}, a.message),
    h("details", {open: openEvidence.has(a.id), ontoggle: (e) => {
      if (e.target.open) openEvidence.add(a.id); else openEvidence.delete(a.id);
    }}, h("summary", {}, "Evidence"), h("dl", {class: "facts"}, facts),
      h("p", {class: "muted"}, `first seen ${when(a.first_seen_ns)}, last seen ${when(a.last_seen_ns)}`)),
    a.capture_id ? h("p", {}, "Evidence capture: ", h("a", {href: `#/capture/${encodeURIComponent(a.capture_id)}`}, a.capture_id))
      : null);
}

export function alertsPage(main) {
  main.append(h("h1", {}, "Alerts"));
  const holder = h("div");
  main.append(h("p", {class: "muted"}, "Firing first, then resolved; refreshed every 5 s. ",
    h("a", {href: "#/rules"}, "Edit the rules.")), holder);
  return every(5000, async () => {
    try {
      const r = await api.get("/v1/alerts", "list alerts");
      put(holder, r.alerts.length ? r.alerts.map(alertCard) : h("p", {}, "No alert has fired."));
    } catch (e) {
      put(holder, errorBox(e));
    }
  });
}
