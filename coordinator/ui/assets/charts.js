// Hand-written charts: Canvas where a chart holds thousands of marks (pod view, heat map,
// per-worker bars), SVG for the small ones. Every chart is a focusable element: arrow keys move
// a cursor, and a text readout beside it says what is under the cursor, so no value is carried by
// colour alone. The breakdown categories keep one colour and one pattern on every page.
import {h, clear, ns, median as medianOf} from "./format.js";

// The step partition, bottom to top. Patterns tell categories apart without colour.
export const CATEGORIES = [
  {key: "compute_ns", label: "compute", color: "#3b6fb6", pattern: "solid"},
  {key: "overlap_ns", label: "overlap", color: "#7fb3e6", pattern: "diagonal"},
  {key: "comm_transfer_ns", label: "comm transfer", color: "#e08a2c", pattern: "solid"},
  {key: "comm_wait_ns", label: "comm wait", color: "#c4452f", pattern: "cross"},
  {key: "memcpy_ns", label: "memcpy", color: "#8a62b5", pattern: "dots"},
  {key: "idle_input_ns", label: "idle: input", color: "#5a9e5a", pattern: "horizontal"},
  {key: "idle_launch_ns", label: "idle: launch", color: "#a5c87a", pattern: "vertical"},
  {key: "idle_host_ns", label: "idle: host", color: "#9a9a9a", pattern: "diagonal"},
  {key: "idle_other_ns", label: "idle: other", color: "#cfcfcf", pattern: "dots"},
];

export const STRAGGLER_COLOR = "#d40000";

// A canvas pattern (or flat colour) for a category.
function fill(ctx, color, pattern) {
  if (pattern === "solid") return color;
  const tile = document.createElement("canvas");
  tile.width = tile.height = 6;
  const t = tile.getContext("2d");
  t.fillStyle = color;
  t.fillRect(0, 0, 6, 6);
  t.strokeStyle = "rgba(255,255,255,0.75)";
  t.fillStyle = "rgba(255,255,255,0.75)";
  t.lineWidth = 1;
  t.beginPath();
  if (pattern === "diagonal") { t.moveTo(0, 6); t.lineTo(6, 0); }
  if (pattern === "horizontal") { t.moveTo(0, 3.5); t.lineTo(6, 3.5); }
  if (pattern === "vertical") { t.moveTo(3.5, 0); t.lineTo(3.5, 6); }
  if (pattern === "cross") { t.moveTo(0, 0); t.lineTo(6, 6); t.moveTo(0, 6); t.lineTo(6, 0); }
  t.stroke();
  if (pattern === "dots") t.fillRect(2, 2, 2, 2);
  return ctx.createPattern(tile, "repeat");
}

export function legend(series) {
  return h("ul", {class: "legend", "aria-label": "legend"}, series.map((s) => {
    const swatch = h("canvas", {width: 14, height: 14, "aria-hidden": "true"});
    const ctx = swatch.getContext("2d");
    ctx.fillStyle = fill(ctx, s.color, s.pattern || "solid");
    ctx.fillRect(0, 0, 14, 14);
    return h("li", {}, swatch, s.label);
  }));
}

// A canvas sized for the device's pixels; returns its 2D context in CSS pixels.
function sizedCanvas(canvas, width, height) {
  const ratio = window.devicePixelRatio || 1;
  canvas.width = Math.round(width * ratio);
  canvas.height = Math.round(height * ratio);
  canvas.style.width = width + "px";
  canvas.style.height = height + "px";
  const ctx = canvas.getContext("2d");
  ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  return ctx;
}

function niceMax(value) {
  if (!(value > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(value)));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= value) return m * p;
  return 10 * p;
}

// A chart with nothing to draw: its title and why, in words (never axes of zeros).
export function emptyChart(title, why) {
  performance.mark(`podscope:drawn:${title}`);  // what there is to show is shown, as a chart's draw
  return h("figure", {class: "chart empty"}, h("figcaption", {}, title), h("p", {class: "muted unknown"}, why));
}

// Stacked columns, one per worker: {workers: [{label, values: {key: v}, highlight, note}],
// series: [{key, label, color, pattern}], format(v), title}. Thousands of workers: one pixel
// (or more) per column; wider than the page, it scrolls.
export function columnChart({workers, series, format = ns, title, height = 260, onPick, empty}) {
  const everyTotal = workers.map((w) => series.reduce((sum, s) => sum + Math.max(0, w.values[s.key] || 0), 0));
  if (!(Math.max(0, ...everyTotal) > 0)) return emptyChart(title, empty || "Every value is zero: nothing to draw.");
  const readout = h("p", {class: "readout", "aria-live": "polite"});
  const canvas = h("canvas", {tabindex: 0, role: "img", "aria-label": `${title}: ${workers.length} workers. Arrow keys move between workers.`});
  const scroller = h("div", {class: "chart-scroll"}, canvas);
  const root = h("figure", {class: "chart"}, h("figcaption", {}, title), legend(series), scroller, readout);
  const totals = workers.map((w) => series.reduce((sum, s) => sum + Math.max(0, w.values[s.key] || 0), 0));
  const max = niceMax(Math.max(0, ...totals));
  let cursor = Math.max(0, workers.findIndex((w) => w.highlight));
  const styles = series.map((s) => ({s, style: null}));
  const margin = {left: 64, right: 8, top: 22, bottom: 22};
  let column = 1;
  let drawn = false;

  function draw() {
    const available = Math.max(200, (root.parentElement ? root.parentElement.clientWidth : 800) - 24);
    column = Math.max(1, Math.floor((available - margin.left - margin.right) / Math.max(1, workers.length)));
    column = Math.min(column, 48);
    const width = margin.left + margin.right + column * workers.length;
    const ctx = sizedCanvas(canvas, width, height);
    const plot = height - margin.top - margin.bottom;
    for (const entry of styles) entry.style = fill(ctx, entry.s.color, entry.s.pattern || "solid");
    ctx.fillStyle = "#fff";
    ctx.fillRect(0, 0, width, height);
    ctx.fillStyle = "#333";
    ctx.font = "11px sans-serif";
    ctx.textAlign = "right";
    for (let i = 0; i <= 4; ++i) {
      const y = margin.top + plot - (plot * i) / 4;
      ctx.fillText(format((max * i) / 4), margin.left - 4, y + 4);
      ctx.strokeStyle = "#e4e4e4";
      ctx.beginPath(); ctx.moveTo(margin.left, y + 0.5); ctx.lineTo(width - margin.right, y + 0.5); ctx.stroke();
    }
    const gap = column >= 4 ? 1 : 0;
    workers.forEach((w, i) => {
      const x = margin.left + i * column;
      let y = margin.top + plot;
      for (const {s, style} of styles) {
        const v = Math.max(0, w.values[s.key] || 0);
        const dh = (v / max) * plot;
        ctx.fillStyle = style;
        ctx.fillRect(x, y - dh, column - gap, dh);
        y -= dh;
      }
      if (w.highlight) {
        // A marker and a label, not only a colour.
        ctx.fillStyle = STRAGGLER_COLOR;
        ctx.beginPath();
        const cx = x + (column - gap) / 2;
        ctx.moveTo(cx, y - 2); ctx.lineTo(cx - 5, y - 10); ctx.lineTo(cx + 5, y - 10); ctx.fill();
        ctx.textAlign = "center";
        ctx.fillText(w.label, Math.max(margin.left + 10, cx), Math.max(10, y - 12));
        ctx.strokeStyle = STRAGGLER_COLOR;
        ctx.lineWidth = 2;
        ctx.strokeRect(x - 0.5, y, Math.max(1, column - gap) + 1, margin.top + plot - y);
        ctx.lineWidth = 1;
      }
    });
    // The cursor.
    ctx.strokeStyle = "#000";
    ctx.setLineDash([3, 2]);
    ctx.strokeRect(margin.left + cursor * column - 1.5, margin.top - 2, column + 2, plot + 4);
    ctx.setLineDash([]);
    ctx.textAlign = "left";
    ctx.fillStyle = "#333";
    ctx.fillText(`${workers.length} workers →`, margin.left, height - 6);
    // The geometry, for tools that read the chart (the browser tests check its pixels).
    Object.assign(canvas.dataset, {left: margin.left, column, columns: workers.length, plotBottom: margin.top + plot,
      highlighted: workers.filter((w) => w.highlight).map((w) => w.label).join(",")});
    if (!drawn) { drawn = true; performance.mark(`podscope:drawn:${title}`); }
    describe();
  }

  function describe() {
    const w = workers[cursor];
    if (!w) { readout.textContent = "no workers"; return; }
    const parts = series.map((s) => `${s.label} ${format(w.values[s.key] || 0)}`);
    readout.textContent = `${w.label}${w.highlight ? " (straggler)" : ""}: total ${format(totals[cursor])}; ${parts.join(", ")}${w.note ? "; " + w.note : ""}`;
  }

  function move(to) {
    cursor = Math.min(workers.length - 1, Math.max(0, to));
    draw();
    if (onPick) onPick(workers[cursor]);
  }
  canvas.addEventListener("keydown", (e) => {
    const step = {ArrowRight: 1, ArrowLeft: -1, PageDown: 16, PageUp: -16}[e.key];
    if (step) { e.preventDefault(); move(cursor + step); }
    if (e.key === "Home") { e.preventDefault(); move(0); }
    if (e.key === "End") { e.preventDefault(); move(workers.length - 1); }
  });
  canvas.addEventListener("mousemove", (e) => {
    const rect = canvas.getBoundingClientRect();
    const i = Math.floor((e.clientX - rect.left - margin.left) / column);
    if (i >= 0 && i < workers.length && i !== cursor) { cursor = i; draw(); }
  });
  canvas.addEventListener("click", () => onPick && onPick(workers[cursor]));
  root.redraw = draw;
  requestAnimationFrame(draw);
  return root;
}

// Light to dark, for step times (longer = darker). Interpolated in RGB between fixed stops.
const RAMP = [[247, 251, 255], [198, 219, 239], [107, 174, 214], [33, 113, 181], [8, 48, 107], [60, 0, 80]];
export function rampColor(t) {
  const x = Math.min(1, Math.max(0, t)) * (RAMP.length - 1);
  const i = Math.min(RAMP.length - 2, Math.floor(x));
  const f = x - i;
  const c = RAMP[i].map((v, k) => Math.round(v + (RAMP[i + 1][k] - v) * f));
  return `rgb(${c[0]},${c[1]},${c[2]})`;
}

// The heat map's colour scale: a step's time against the median step, from the median (palest)
// to `top` above it (darkest), `top` at least 10%. A min-to-max scale gave 1% of noise full
// contrast; against the median with that floor, noise stays pale and a straggler stands out.
export function heatScale(values) {
  const finite = [];
  for (const row of values) for (const v of row) if (v >= 0) finite.push(v);
  finite.sort((a, b) => a - b);
  const median = medianOf(finite);
  // The 99th percentile, not the maximum: one warm-up step at 20 times the median must not make
  // a 30% straggler pale. Longer steps are darkest.
  const max = finite.length ? finite[Math.min(finite.length - 1, Math.floor(finite.length * 0.99))] : 0;
  const top = median > 0 ? Math.max(0.10, max / median - 1) : 0.10;
  return {median, top, t: (v) => (median > 0 ? Math.min(1, Math.max(0, (v / median - 1) / top)) : 0)};
}

// The worker x step heat map of step times: {ranks, steps, values[rank row][step col] (-1:
// missing), highlight: Set of ranks}. More ranks than pixel rows: each row is a group of ranks
// showing its longest step (a straggler never averages away). Drag across rows to zoom in.
export function heatMap({ranks, steps, values, highlight = new Set(), title = "Step time per worker and step"}) {
  const readout = h("p", {class: "readout", "aria-live": "polite"});
  const canvas = h("canvas", {tabindex: 0, role: "img",
    "aria-label": `${title}: ${ranks.length} workers by ${steps.length} steps. Arrow keys move; + and - zoom; 0 resets.`});
  const zoomOut = h("button", {type: "button", onclick: () => zoom(0, ranks.length)}, "Reset zoom");
  const scale = h("div", {class: "scale"});
  const rowsNote = h("span", {class: "muted"});
  const root = h("figure", {class: "chart"}, h("figcaption", {}, title), h("div", {class: "chart-tools"}, zoomOut, scale, rowsNote),
    h("div", {class: "chart-scroll"}, canvas), readout);
  let lo = 0, hi = ranks.length;  // visible rank rows [lo, hi)
  let cursor = {row: 0, col: 0};
  let geometry = null;
  let drag = null;
  let drawn = false;
  const {median, top, t} = heatScale(values);

  // Shows ranks [a, b), moved inside the range when it sticks out (it keeps its width).
  function zoom(a, b) {
    const width = Math.max(1, Math.min(b - a, ranks.length));
    lo = Math.max(0, Math.min(a, ranks.length - width));
    hi = lo + width;
    cursor = {row: 0, col: cursor.col};
    draw();
  }

  function draw() {
    const available = Math.max(240, (root.parentElement ? root.parentElement.clientWidth : 800) - 24);
    const margin = {left: 84, top: 8, right: 10, bottom: 24};
    const cellW = Math.max(2, Math.min(24, Math.floor((available - margin.left - margin.right) / Math.max(1, steps.length))));
    const visible = hi - lo;
    const maxRows = 480;
    const group = Math.max(1, Math.ceil(visible / maxRows));
    const rows = Math.ceil(visible / group);
    const cellH = Math.max(1, Math.min(18, Math.floor(maxRows / rows)));
    const width = margin.left + margin.right + cellW * steps.length;
    const height = margin.top + margin.bottom + cellH * rows;
    geometry = {margin, cellW, cellH, group, rows};
    const ctx = sizedCanvas(canvas, width, height);
    ctx.fillStyle = "#fff";
    ctx.fillRect(0, 0, width, height);
    for (let r = 0; r < rows; ++r) {
      const first = lo + r * group, last = Math.min(hi, first + group);
      let straggler = false;
      for (let c = 0; c < steps.length; ++c) {
        let v = -1;
        for (let k = first; k < last; ++k) v = Math.max(v, values[k][c]);
        ctx.fillStyle = v < 0 ? "#e0e0e0" : rampColor(t(v));
        ctx.fillRect(margin.left + c * cellW, margin.top + r * cellH, cellW, cellH);
      }
      for (let k = first; k < last; ++k) straggler = straggler || highlight.has(ranks[k]);
      if (straggler) {
        ctx.fillStyle = STRAGGLER_COLOR;
        ctx.fillRect(margin.left - 8, margin.top + r * cellH, 6, Math.max(cellH, 2));
        ctx.font = "11px sans-serif";
        ctx.textAlign = "right";
        ctx.fillText(`▶ rank ${ranks[first]}${last - first > 1 ? "…" : ""}`, margin.left - 10, margin.top + r * cellH + Math.max(cellH, 10));
      }
    }
    ctx.fillStyle = "#333";
    ctx.font = "11px sans-serif";
    ctx.textAlign = "left";
    ctx.fillText(`steps ${steps[0] ?? ""} … ${steps[steps.length - 1] ?? ""} →`, margin.left, height - 8);
    rowsNote.textContent = `Rows: ranks ${ranks[lo]}–${ranks[hi - 1]}${group > 1 ? `, ${group} ranks per row (the longest step shown)` : ""}. ` +
      "Drag across rows, or press + on the focused map, to zoom in.";
    // Cursor.
    ctx.strokeStyle = "#000";
    ctx.lineWidth = 1.5;
    ctx.strokeRect(margin.left + cursor.col * cellW - 0.5, margin.top + cursor.row * cellH - 0.5, cellW + 1, cellH + 1);
    if (drag) {
      ctx.fillStyle = "rgba(0,0,0,0.15)";
      const a = Math.min(drag.from, drag.to), b = Math.max(drag.from, drag.to);
      ctx.fillRect(margin.left, margin.top + a * cellH, cellW * steps.length, (b - a + 1) * cellH);
    }
    zoomOut.disabled = lo === 0 && hi === ranks.length;
    Object.assign(canvas.dataset, {left: margin.left, rows, group, cellHeight: cellH, cellWidth: cellW});
    if (!drawn) { drawn = true; performance.mark(`podscope:drawn:${title}`); }
    drawScale();
    describe();
  }

  function drawScale() {
    clear(scale);
    const bar = h("canvas", {width: 160, height: 10, "aria-hidden": "true"});
    const ctx = bar.getContext("2d");
    for (let x = 0; x < 160; ++x) { ctx.fillStyle = rampColor(x / 159); ctx.fillRect(x, 0, 1, 10); }
    scale.append(`step time: median ${ns(median)} or less `, bar,
      ` +${(100 * top).toFixed(0)}% (${ns(median * (1 + top))}) or more; grey: no step`);
  }

  function describe() {
    const {group} = geometry;
    const first = lo + cursor.row * group, last = Math.min(hi, first + group);
    let v = -1, at = first;
    for (let k = first; k < last; ++k) if (values[k][cursor.col] > v) { v = values[k][cursor.col]; at = k; }
    const who = last - first > 1 ? `ranks ${ranks[first]}–${ranks[last - 1]} (longest: rank ${ranks[at]})` : `rank ${ranks[first]}`;
    const flag = highlight.has(ranks[at]) ? " (straggler)" : "";
    readout.textContent = `${who}${flag}, step ${steps[cursor.col]}: ${v < 0 ? "no step" : ns(v)}`;
  }

  function cellAt(e) {
    const rect = canvas.getBoundingClientRect();
    const {margin, cellW, cellH, rows} = geometry;
    const col = Math.floor((e.clientX - rect.left - margin.left) / cellW);
    const row = Math.floor((e.clientY - rect.top - margin.top) / cellH);
    if (col < 0 || col >= steps.length || row < 0 || row >= rows) return null;
    return {row, col};
  }
  canvas.addEventListener("mousedown", (e) => { const c = cellAt(e); if (c) drag = {from: c.row, to: c.row}; });
  canvas.addEventListener("mousemove", (e) => {
    const c = cellAt(e);
    if (!c) return;
    cursor = c;
    if (drag) drag.to = c.row;
    draw();
  });
  // On the canvas, not the window: a listener on the window would outlive the page. A drag that
  // leaves the map is dropped.
  canvas.addEventListener("mouseleave", () => { if (drag) { drag = null; draw(); } });
  canvas.addEventListener("mouseup", () => {
    if (!drag) return;
    const a = Math.min(drag.from, drag.to), b = Math.max(drag.from, drag.to);
    drag = null;
    if (b > a) zoom(lo + a * geometry.group, lo + (b + 1) * geometry.group);
    else draw();
  });
  canvas.addEventListener("keydown", (e) => {
    const {rows} = geometry;
    const moves = {ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1]};
    if (moves[e.key]) {
      e.preventDefault();
      cursor = {row: Math.min(rows - 1, Math.max(0, cursor.row + moves[e.key][0])),
                col: Math.min(steps.length - 1, Math.max(0, cursor.col + moves[e.key][1]))};
      draw();
    } else if (e.key === "+" || e.key === "=") {
      const first = lo + cursor.row * geometry.group;
      const span = Math.max(1, Math.floor((hi - lo) / 4));
      zoom(first - Math.floor(span / 2), first + Math.ceil(span / 2));
    } else if (e.key === "-") {
      const span = (hi - lo) * 2;
      zoom(lo - Math.floor(span / 4), hi + Math.ceil(span / 4));
    } else if (e.key === "0") {
      zoom(0, ranks.length);
    }
  });
  root.redraw = draw;
  root.zoom = zoom;
  requestAnimationFrame(draw);
  return root;
}

// SVG x/y chart: {series: [{label, color, dash, points: [[x, y]], marker}], xLabel, yLabel,
// xFormat, yFormat, logX, hLines: [{y, label}]}. Points as lines (kind "line") or dots.
export function xyChart({series, title, xLabel, yLabel, xFormat = String, yFormat = String, logX = false,
                         kind = "line", hLines = [], width = 640, height = 260}) {
  const margin = {left: 70, right: 16, top: 24, bottom: 40};
  const all = series.flatMap((s) => s.points);
  // Loops, not Math.min(...xs): spreading 100k points overflows the call stack.
  let x0 = Infinity, x1 = -Infinity, ymax = -Infinity, ymin = Infinity;
  for (const p of all) {
    const x = logX ? Math.log10(Math.max(p[0], 1)) : p[0];
    x0 = Math.min(x0, x); x1 = Math.max(x1, x);
    ymin = Math.min(ymin, p[1]); ymax = Math.max(ymax, p[1]);
  }
  for (const l of hLines) { ymin = Math.min(ymin, l.y); ymax = Math.max(ymax, l.y); }
  if (!Number.isFinite(x0)) { x0 = 0; x1 = 1; }
  if (x1 - x0 < 1e-9) { x0 -= logX ? 0.5 : 1; x1 += logX ? 0.5 : 1; }  // one x value: centre it
  const y1 = niceMax(Number.isFinite(ymax) ? ymax : 1);
  const y0 = Number.isFinite(ymin) ? Math.min(0, ymin) : 0;
  const sx = (x) => margin.left + ((logX ? Math.log10(Math.max(x, 1)) : x) - x0) / (x1 - x0 || 1) * (width - margin.left - margin.right);
  const sy = (y) => height - margin.bottom - (y - y0) / (y1 - y0 || 1) * (height - margin.top - margin.bottom);
  const svg = h("svg:svg", {viewBox: `0 0 ${width} ${height}`, class: "xy", role: "img", "aria-label": title});
  const axis = h("svg:g", {class: "axis"});
  for (let i = 0; i <= 4; ++i) {
    const y = y0 + ((y1 - y0) * i) / 4;
    axis.append(h("svg:line", {x1: margin.left, x2: width - margin.right, y1: sy(y), y2: sy(y), class: "grid"}));
    axis.append(h("svg:text", {x: margin.left - 6, y: sy(y) + 4, "text-anchor": "end"}, yFormat(y)));
  }
  for (let i = 0; i <= 4; ++i) {
    const xv = x0 + ((x1 - x0) * i) / 4;
    const x = logX ? Math.pow(10, xv) : xv;
    axis.append(h("svg:text", {x: sx(x), y: height - margin.bottom + 16, "text-anchor": "middle"}, xFormat(x)));
  }
  axis.append(h("svg:text", {x: (width + margin.left) / 2, y: height - 6, "text-anchor": "middle", class: "label"}, xLabel));
  axis.append(h("svg:text", {x: 4, y: 12, class: "label"}, yLabel));
  svg.append(axis);
  for (const l of hLines) {
    svg.append(h("svg:line", {x1: margin.left, x2: width - margin.right, y1: sy(l.y), y2: sy(l.y), class: "hline"}));
    svg.append(h("svg:text", {x: width - margin.right - 4, y: sy(l.y) - 4, "text-anchor": "end", class: "hline-label"}, l.label));
  }
  for (const s of series) {
    const g = h("svg:g", {}, h("svg:title", {}, s.label));
    if (kind === "line" && s.points.length > 1) {
      g.append(h("svg:polyline", {points: s.points.map((p) => `${sx(p[0])},${sy(p[1])}`).join(" "), fill: "none",
        stroke: s.color, "stroke-width": s.width || 1.5, "stroke-dasharray": s.dash || null}));
    }
    for (const p of kind === "line" ? s.points.slice(-1) : s.points) {
      g.append(s.marker === "square"
        ? h("svg:rect", {x: sx(p[0]) - 3, y: sy(p[1]) - 3, width: 6, height: 6, fill: s.color})
        : h("svg:circle", {cx: sx(p[0]), cy: sy(p[1]), r: 3, fill: s.color}));
    }
    svg.append(g);
  }
  const key = h("ul", {class: "legend"}, series.map((s) => h("li", {}, h("span", {class: "line-key", "data-color": s.color}), s.label)));
  for (const [i, li] of [...key.children].entries()) {
    const mark = li.firstChild;
    mark.style.borderTopColor = series[i].color;
    if (series[i].dash) mark.style.borderTopStyle = "dashed";
  }
  return h("figure", {class: "chart"}, h("figcaption", {}, title), key, svg);
}
