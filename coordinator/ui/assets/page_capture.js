// The capture page: pod view, heat map, overlap, wait vs transfer, stragglers, AllReduce
// bandwidth, top kernels, clock bounds, and the Perfetto trace. Stragglers are marked in every
// chart. Each panel loads on its own, with progress, so one slow analysis holds up nothing else.
import * as api from "./api.js";
import {h, clear, put, ns, pct, count, bytes, when, table, agentClock, shortName, median} from "./format.js";
import {CATEGORIES, columnChart, emptyChart, heatMap, xyChart} from "./charts.js";
import {panel, errorBox, every} from "./widgets.js";
import {stateBadge} from "./page_captures.js";

const ENDED = new Set(["complete", "partial", "failed", "cancelled"]);

export function capturePage(main, id) {
  const base = `/v1/captures/${encodeURIComponent(id)}`;
  main.append(h("h1", {}, `Capture ${id}`));
  const head = h("section", {class: "panel"}, h("p", {class: "progress"}, "loading…"));
  const body = h("div");
  main.append(head, body);
  let rendered = false;
  const poll = every(1000, async () => {
    let record;
    try {
      record = await api.get(base, `read capture ${id}`);
    } catch (e) {
      put(head, errorBox(e));
      poll.stop();
      return;
    }
    put(head, facts(record, base));
    if (!ENDED.has(record.state)) {
      const done = record.workers.filter((w) => ENDED.has(w.state)).length;
      put(body, h("section", {class: "panel"}, h("p", {class: "progress"},
        h("progress", {max: Math.max(1, record.workers.length), value: done}),
        `${record.state}: ${done} of ${record.workers.length} workers done; the analyses show once the capture has ended.`)));
      return;
    }
    poll.stop();
    if (!rendered) {
      rendered = true;
      clear(body);
      if (record.events === 0) {
        body.append(h("section", {class: "panel"}, h("p", {}, `This capture (${record.state}) holds no events${record.error ? ": " + record.error : ""}.`)));
        return;
      }
      analyses(body, base, record);
    }
  });
  return poll;
}

function facts(c, base) {
  const progress = h("span", {"aria-live": "polite"});
  const download = h("button", {type: "button", class: "secondary", onclick: async () => {
    download.disabled = true;
    try {
      const got = await api.download(`${base}/trace`, `${c.id}.json`, (n) => { progress.textContent = `downloading… ${bytes(n)}`; });
      progress.textContent = `saved ${c.id}.json (${bytes(got)}): open it at ui.perfetto.dev or chrome://tracing`;
    } catch (e) {
      put(progress, errorBox(e));
    } finally {
      download.disabled = false;
    }
  }}, "Download Perfetto trace");
  const failed = c.workers.filter((w) => w.error);
  return h("div", {},
    h("dl", {class: "facts"},
      h("dt", {}, "state"), h("dd", {}, stateBadge(c.state), c.error ? ` ${c.error}` : ""),
      h("dt", {}, "job"), h("dd", {}, c.job),
      h("dt", {}, "workers"), h("dd", {}, count(c.workers.length)),
      h("dt", {}, "events"), h("dd", {}, count(c.events)),
      h("dt", {}, "window"), h("dd", {}, c.window ? `${ns(c.window.duration_ns)} from ${when(c.window.start_ns)}, start skew ≤ ${ns(c.window.max_start_skew_ns)}` : "–"),
      h("dt", {}, "created"), h("dd", {}, when(c.created_ns))),
    failed.length ? h("details", {}, h("summary", {}, `${failed.length} workers failed`),
      h("ul", {}, failed.slice(0, 50).map((w) => h("li", {}, `rank ${w.rank} (${w.host}): ${w.error}`)))) : null,
    ENDED.has(c.state) && c.events > 0 ? h("div", {class: "row"}, download, progress,
      h("a", {href: `#/capture-new/${encodeURIComponent(c.job)}`}, "Capture this job again")) : null);
}

function analyses(body, base, record) {
  const stragglers = api.get(`${base}/stragglers`, "the straggler report");
  const flagged = stragglers.then((r) => new Set(r.stragglers.map((s) => s.rank))).catch(() => new Set());
  const matrix = api.get(`${base}/pod?detail=workers`, "the step-time matrix");
  const podHolder = h("div");
  body.append(
    panel("Overview", async () => overviewPanel(await api.get(`${base}/overview`, "the overview"))),
    panel("Stragglers", async () => stragglerReport(await stragglers)),
    h("section", {class: "panel"}, h("h2", {}, "Pod view"), podHolder),
    panel("Step time per worker and step", async () => {
      const [m, f] = await Promise.all([matrix, flagged]);
      if (!m.matrix.ranks.length) return h("p", {}, "No steps found in this capture.");
      return heatMap({ranks: m.matrix.ranks, steps: m.matrix.steps, values: m.matrix.step_time_ns, highlight: f,
        title: "Step time, worker × step (darker is longer)"});
    }),
    h("div", {class: "grid2"},
      panel("Computation / communication overlap", async () => overlapChart(await api.get(`${base}/overlap?detail=workers`, "the overlap report"), await flagged)),
      panel("Wait vs transfer", async () => waitChart(await api.get(`${base}/communication?detail=workers`, "the communication report"), await flagged))),
    panel("GPU efficiency", async () => gpuChart(await api.get(`${base}/gpu?detail=workers`, "the GPU report"), await flagged)),
    allReducePanel(base),
    h("div", {class: "grid2"},
      panel("Top kernels (pod)", async () => kernelTable(await api.get(`${base}/kernels?top=20&detail=workers`, "the kernel report"))),
      panel("Clock bounds per worker", async () => clockChart(record, await flagged))));
  podHolder.append(panel("", async () => {
    const [m, f] = await Promise.all([matrix, flagged]);
    return podView(base, m.matrix.steps, f);
  }));
}

function stragglerReport(r) {
  const lines = [];
  if (!r.stragglers.length) {
    lines.push(h("p", {}, "No straggler: no worker held the others up significantly in this window."));
  } else {
    lines.push(h("p", {}, `Ranked by the delay each caused; the cost is the step time the job would have saved ` +
      `without that rank's excess (${ns(r.step_time_loss_ns)} in all over ${ns(r.window_step_time_ns)} of steps).`));
    lines.push(table([
      {label: "rank", value: (s) => `rank ${s.rank}`},
      {label: "host", value: (s) => s.host},
      {label: "step-time loss", num: true, value: (s) => ns(s.step_time_loss_ns)},
      {label: "caused delay", num: true, value: (s) => ns(s.caused_delay_ns)},
      {label: "last to arrive", num: true, value: (s) => pct(s.last_arriver_share)},
      {label: "where its time went", value: (s) => s.category},
      {label: "why", value: (s) => s.reason === "caused_delay" ? "held the others up" : s.reason === "compute_outlier" ? `compute outlier (z ${s.compute_z})` : s.reason},
      {label: "clock bound", num: true, value: (s) => "±" + ns(s.clock_error_bound_ns)},
      // One line per name, shortened (whole in its tooltip): three wrapped kernel names made the
      // row taller than a phone's screen.
      {label: "evidence", value: (s) => s.evidence && s.evidence.top ? s.evidence.top.slice(0, 3).map((k) =>
        h("div", {class: "nowrap", title: k.name}, `${shortName(k.name, 48)}: ${ns(k.worker_ns)} vs median ${ns(k.median_ns)}`)) : ""},
    ], r.stragglers, {label: "stragglers", rowClass: () => "straggler"}));
  }
  lines.push(h("p", {class: "muted"}, `Clocks: ${r.aligned ? "aligned" : "not aligned"} (${r.clock_basis}), error bound ±${ns(r.clock_error_bound_ns)}.`));
  for (const w of r.warnings || []) lines.push(h("p", {class: "error"}, w));
  return lines;
}

// One step, one stacked column per worker in the breakdown categories.
function podView(base, steps, flagged) {
  if (!steps.length) return h("p", {}, "No steps found in this capture.");
  const holder = h("div");
  const select = h("select", {id: "pod-step", "aria-label": "step"}, steps.map((s) => h("option", {value: s}, `step ${s}`)));
  let index = Math.floor(steps.length / 2);
  select.value = String(steps[index]);
  const go = (i) => { index = Math.min(steps.length - 1, Math.max(0, i)); select.value = String(steps[index]); show(); };
  select.addEventListener("change", () => go(steps.indexOf(Number(select.value))));
  const prev = h("button", {type: "button", class: "secondary", onclick: () => go(index - 1), "aria-label": "previous step"}, "◀");
  const next = h("button", {type: "button", class: "secondary", onclick: () => go(index + 1), "aria-label": "next step"}, "▶");
  let shown = 0;  // the latest request: a slower earlier answer must not replace it
  async function show() {
    const step = steps[index];
    const mine = ++shown;
    put(holder, h("p", {class: "progress"}, h("progress"), `loading step ${step}…`));
    try {
      const pod = await api.get(`${base}/pod?steps=${step}-${step}`, `the pod view of step ${step}`);
      if (mine !== shown) return;
      const s = pod.steps[0];
      if (!s) { put(holder, h("p", {}, `No worker has step ${step}.`)); return; }
      const workers = s.rows.map((row) => ({label: `rank ${row.rank}`, values: row, highlight: flagged.has(row.rank),
        note: `step ${ns(row.step_ns)} (${row.deviation_pct >= 0 ? "+" : ""}${row.deviation_pct}% vs median)`}));
      put(holder, 
        h("p", {class: "muted"}, `This step's median over its ${count(s.rows.length)} workers: ${ns(s.median_step_ns)}. ` +
          "Each column partitions one worker's step; ▲ marks a straggler."),
        columnChart({workers, series: CATEGORIES, title: `Step ${step}: where each worker's time went`}));
    } catch (e) {
      if (mine === shown) put(holder, errorBox(e));
    }
  }
  show();
  return h("div", {}, h("div", {class: "row"}, prev, select, next), holder);
}

function overlapChart(r, flagged) {
  const workers = r.workers.map((w) => ({label: `rank ${w.rank}`, highlight: flagged.has(w.rank),
    values: {computation_ns: w.computation_ns, overlap_ns: w.overlap_ns, communication_ns: w.communication_ns},
    note: w.overlap_pct === null ? `no communication kernels over ${w.step_count} steps` : `${w.overlap_pct}% of communication hidden over ${w.step_count} steps`}));
  // Unknown where a worker ran no communication kernels (null): left out, never taken as 0.
  const hidden = r.workers.map((w) => w.overlap_pct).filter((p) => p !== null);
  return [h("p", {class: "muted"}, hidden.length ? `Median over workers of the share of communication hidden behind computation: ${median(hidden).toFixed(1)}%.`
      : "No worker ran communication kernels: there is no communication to hide."),
    columnChart({workers, title: "Per worker, over the window", height: 200, series: [
      {key: "computation_ns", label: "computation only", color: "#3b6fb6", pattern: "solid"},
      {key: "overlap_ns", label: "overlap", color: "#7fb3e6", pattern: "diagonal"},
      {key: "communication_ns", label: "communication only", color: "#e08a2c", pattern: "solid"}]})];
}

function waitChart(r, flagged) {
  const workers = r.workers.map((w) => ({label: `rank ${w.rank}`, highlight: flagged.has(w.rank),
    values: {transfer_ns: w.transfer_ns, wait_ns: w.wait_ns},
    note: `${count(w.collectives)} collectives, ${pct(w.wait_ns / Math.max(1, w.wait_ns + w.transfer_ns))} waiting`}));
  return [h("p", {class: "muted"}, `Clocks ${r.aligned ? "aligned" : "not aligned"} (${r.clock_basis}); a rank waits for the last arrival of each collective.`),
    columnChart({workers, title: "Collective time per worker", height: 200, series: [
      {key: "transfer_ns", label: "transfer", color: "#e08a2c", pattern: "solid"},
      {key: "wait_ns", label: "wait", color: "#c4452f", pattern: "cross"}]})];
}

function allReducePanel(base) {
  const holder = h("div");
  const link = h("input", {type: "number", min: 0, step: "any", id: "link-gbytes-per-s", placeholder: "e.g. 50", size: 8});
  const apply = h("button", {type: "submit", class: "secondary"}, "Draw");
  const form = h("form", {class: "row", onsubmit: (e) => { e.preventDefault(); show(); }},
    h("label", {for: "link-gbytes-per-s"}, "Link bandwidth (GB/s, 1e9 bytes/s)"), link, apply);
  let shown = 0;
  async function show() {
    const mine = ++shown;
    put(holder, h("p", {class: "progress"}, h("progress"), "loading…"));
    try {
      const q = link.value && Number(link.value) > 0 ? `?link_gbytes_per_s=${Number(link.value)}` : "";
      const r = await api.get(`${base}/allreduce${q}`, "the AllReduce report");
      if (mine !== shown) return;
      const ops = new Map();
      for (const c of r.collectives) {
        if (!ops.has(c.op)) ops.set(c.op, []);
        if (c.busbw_gbytes_per_s !== null) ops.get(c.op).push([c.bytes, c.busbw_gbytes_per_s]);  // unknown: not drawn at 0
      }
      const colors = ["#1a56b0", "#e08a2c", "#5a9e5a", "#8a62b5", "#c4452f", "#555"];
      const kMaxPoints = 20000;  // per operation: beyond that the dots only overlap
      const cut = [...ops.values()].some((p) => p.length > kMaxPoints);
      const series = [...ops].map(([op, points], i) => ({label: op, color: colors[i % colors.length], points: points.slice(0, kMaxPoints),
        marker: i % 2 ? "square" : "circle"}));
      // The capture's median as every view gives it (the report's, not one of the page's own).
      const median = r.median_busbw_gbytes_per_s > 0 ? `${r.median_busbw_gbytes_per_s.toFixed(1)} GB/s` : "— (no collective moved data)";
      put(holder,
        h("p", {class: "muted", id: "allreduce-readout"}, `${count(r.collectives.length)} collectives; median bus bandwidth ${median}` +
          (r.link_gbytes_per_s > 0 ? (r.median_efficiency > 0 ? `, ${(100 * r.median_efficiency).toFixed(0)}%` : "") + ` of the ${r.link_gbytes_per_s} GB/s link` : "; enter the link bandwidth to draw the link line and see efficiency") +
          `. Measured AllReduce per step ${ns(r.measured_allreduce_ns)}` +
          (r.expected_allreduce_ns !== null && r.expected_allreduce_ns !== undefined ? `, expected ${ns(r.expected_allreduce_ns)}` : "") + "." +
          (cut ? ` The chart shows the first ${count(kMaxPoints)} collectives of each operation.` : "")),
        series.length ? xyChart({series, kind: "dots", logX: true, title: "Bus bandwidth against message size",
          xLabel: "message size (bytes, log scale)", yLabel: "GB/s", xFormat: bytes, yFormat: (v) => v.toFixed(0),
          hLines: r.link_gbytes_per_s > 0 ? [{y: r.link_gbytes_per_s, label: `link ${r.link_gbytes_per_s} GB/s`}] : []})
          : h("p", {}, "No collectives in this capture."));
      performance.mark("podscope:loaded:AllReduce bandwidth");
    } catch (e) {
      if (mine === shown) put(holder, errorBox(e));
    }
  }
  show();
  return h("section", {class: "panel"}, h("h2", {}, "AllReduce bandwidth"), form, holder);
}

// The pod in three lines, then what to try, most step time at stake first, each with the numbers
// that triggered it.
function overviewPanel(o) {
  const b = o.breakdown;
  const fraction = (v) => (v === null || v === undefined ? "unknown" : pct(v));
  const lines = [
    `${count(o.workers)} workers, ${count(o.steps)} steps; step time median ${ns(o.step_p50_ns)}, longest ${ns(o.step_max_ns)}.`,
    `Step time: compute ${pct(b.compute_share)}, overlap ${pct(b.overlap_share)}, communication waiting ${pct(b.comm_wait_share)} ` +
      `and transferring ${pct(b.comm_transfer_share)}, copies ${pct(b.memcpy_share)}; idle on input ${pct(b.idle_input_share)}, ` +
      `launches ${pct(b.idle_launch_share)}, host ${pct(b.idle_host_share)}, other ${pct(b.idle_other_share)}.`,
    `GPU utilization ${fraction(o.gpu.median_gpu_utilization)}, Est. SM Efficiency ${fraction(o.gpu.median_sm_efficiency)}, ` +
      `Est. Achieved Occupancy ${fraction(o.gpu.median_achieved_occupancy)} (medians); Tensor Cores run ${pct(o.gpu.tensor_core_share)} ` +
      `of compute-kernel time, FP32 GEMMs on CUDA cores ${pct(o.gpu.fp32_gemm_share)} of kernel time. Communication exposed ${pct(o.communication.exposed_share)} of the median worker's step.`,
    ...o.communication.communicator_groups.map((g) =>
      `${g.communicators > 1 ? `${count(g.communicators)} communicators like ${g.example}` : `Communicator ${g.example}`} ` +
      `(${count(g.size)} ranks${g.description ? ", " + g.description : ""}): ` +
      `${g.kind.replaceAll("_", " ")}, ${g.calls_per_step} calls per step; ${g.reason}.`),
  ];
  const recommendations = o.recommendations.length
    ? h("ol", {class: "recommendations"}, ...o.recommendations.map((r) => h("li", {},
        h("strong", {}, r.title), ` — ${pct(r.step_share)} of step time at stake.`,
        r.subject ? h("div", {class: "muted"}, `${r.rule === "cast_copies" ? "operator" : "kernel"}: ${r.subject}`) : null,
        h("div", {}, `Try: ${r.advice}.`),
        h("div", {class: "muted"}, "Evidence: " + Object.entries(r.evidence).map(([k, v]) => `${k} = ${Number(v).toPrecision(4)}`).join(", ") +
          (r.ranks.length ? `; ranks ${r.ranks.join(", ")}` : "")))))
    : h("p", {}, "No recommendation: no rule's threshold is crossed.");
  return [...lines.map((l) => h("p", {}, l)), h("h3", {}, "Recommendations"), recommendations];
}

// Per worker, the step spans split three ways: SM efficiency (the SMs' estimated share in use),
// the rest of the busy time, and idle; the three stack to 100%.
function gpuChart(r, flagged) {
  const fraction = (v) => (v === null || v === undefined ? "unknown" : pct(v));
  const workers = r.workers.map((w) => {
    const sm = w.sm_efficiency ?? 0;
    return {label: `rank ${w.rank}`, highlight: flagged.has(w.rank),
      values: {sm, busy: Math.max(0, w.gpu_utilization - sm), idle: Math.max(0, 1 - w.gpu_utilization)},
      note: `GPU utilization ${pct(w.gpu_utilization)}, Est. SM Efficiency ${fraction(w.sm_efficiency)}, ` +
        `Est. Achieved Occupancy ${fraction(w.achieved_occupancy)}${w.device ? ` (${w.device})` : ""}`};
  });
  const p = r.pod;
  return [h("p", {class: "muted"}, `Pod medians: GPU utilization ${fraction(p.median_gpu_utilization)}, ` +
      `Est. SM Efficiency ${fraction(p.median_sm_efficiency)}, Est. Achieved Occupancy ${fraction(p.median_achieved_occupancy)}. ` +
      `Least utilized: ${p.least_utilized.length ? p.least_utilized.map((rank) => `rank ${rank}`).join(", ") : "none"}.`),
    columnChart({workers, title: "Step time by GPU use, per worker", height: 180, format: (v) => pct(v), series: [
      {key: "sm", label: "SMs in use (Est. SM Efficiency)", color: "#3b6fb6", pattern: "solid"},
      {key: "busy", label: "rest of the busy time", color: "#7fb3e6", pattern: "diagonal"},
      {key: "idle", label: "no kernel running", color: "#cfcfcf", pattern: "dots"}]})];
}

function kernelTable(r) {
  const tc = r.tensor_cores;
  const fp32 = tc.kernel_ns > 0 ? tc.fp32_gemm_ns / tc.kernel_ns : 0;
  return [h("p", {class: "muted"}, `Compute-kernel time on Tensor Cores: ${pct(tc.share)} (${ns(tc.tensor_core_ns)} of ${ns(tc.compute_ns)})` +
    (tc.fp32_gemm_ns > 0 ? `; FP32 GEMMs on CUDA cores of GPUs with TF32 Tensor Cores: ${pct(fp32)} of kernel time.` : ".")),
    table([
    {label: "kernel", name: true, value: (k) => h("span", {title: k.name}, k.name.length > 100 ? k.name.slice(0, 100) + "…" : k.name)},
    {label: "class", value: (k) => k.class},
    {label: "count", num: true, value: (k) => count(k.count)},
    {label: "total", num: true, value: (k) => ns(k.total_ns)},
    {label: "mean", num: true, value: (k) => ns(k.mean_ns)},
    {label: "share", num: true, value: (k) => pct(k.share)},
    {label: "occupancy", num: true, value: (k) => (k.achieved_occupancy === null ? "–" : pct(k.achieved_occupancy))},
    {label: "math", value: (k) => h("span", {title: k.math_rule ? `rule: ${k.math_rule}` : "no marker in the name"},
      k.math === "tensor_cores" ? "Tensor Cores" : k.math === "fp32_gemm_cuda_cores" ? "FP32 GEMM, CUDA cores" : "CUDA cores")},
  ], r.pod, {label: "top kernels"})];
}

function clockChart(record, flagged) {
  // Imported traces keep their own clocks: no model, so no bound is known (not a bound of 0).
  if (!record.workers.some((w) => w.clock && w.clock.source !== "none"))
    return [emptyChart("Clock error bound per worker", "Unknown: these traces were not captured by podscope's agents, so each rank keeps its own clock and no bound between them is known. Compare arrivals across ranks with care.")];
  const workers = record.workers.map((w) => ({label: `rank ${w.rank}`, highlight: flagged.has(w.rank),
    values: {bound: w.clock ? w.clock.error_bound_ns : 0},
    note: w.clock ? `${w.clock.source}: its clock ${agentClock(w.clock).offset}, ${agentClock(w.clock).drift}` : "no clock model"}));
  const bounds = record.workers.map((w) => (w.clock ? w.clock.error_bound_ns : 0));
  return [h("p", {class: "muted"}, `Largest bound ±${ns(Math.max(0, ...bounds))}: differences smaller than that between workers are not real.`),
    columnChart({workers, title: "Clock error bound per worker", height: 160, series: [{key: "bound", label: "error bound", color: "#8a62b5", pattern: "solid"}]})];
}
