// DOM building and number formatting. Every piece of data reaches the page as text nodes
// (textContent), never as HTML: a kernel or job name from a trace cannot become markup.

// h("div", {class: "x", onclick: f}, child, "text", [more]) -> element.
export function h(tag, attrs, ...children) {
  const el = tag.startsWith("svg:")
    ? document.createElementNS("http://www.w3.org/2000/svg", tag.slice(4))
    : document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "text") el.textContent = String(value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

// Replaces el's children with these (arrays flattened, strings as text).
export function put(el, ...children) {
  clear(el);
  append(el, children);
  return el;
}

// Nanoseconds as the unit a person reads: "812 ns", "4.41 ms", "1.93 s".
export function ns(value) {
  if (value === null || value === undefined || !Number.isFinite(value)) return "–";
  if (value < 0) return "−" + ns(-value);
  if (value >= 1e9) return (value / 1e9).toFixed(2) + " s";
  if (value >= 1e6) return (value / 1e6).toFixed(2) + " ms";
  if (value >= 1e3) return (value / 1e3).toFixed(1) + " µs";
  return Math.round(value) + " ns";
}

// Milliseconds (the watch API's unit); under one, in microseconds.
export function ms(value) {
  if (value === null || value === undefined || !Number.isFinite(value)) return "–";
  if (value === 0) return "0 ms";
  if (Math.abs(value) < 1) return (value * 1000).toFixed(1).replace(/^-0\.0$/, "0.0") + " µs";
  return value.toFixed(Math.abs(value) >= 100 ? 1 : 2) + " ms";
}

// An agent's clock against the coordinator's, from its clock model. The model holds the
// correction added to the agent's times (aligned = local + offset + drift over time), so an agent
// 20 ms ahead and 30 ppm fast has offset_ns -20e6 and drift_ppb -30000: the clock itself is the
// opposite of the correction.
export function agentClock(clock) {
  if (!clock) return {offset: "–", drift: "–"};
  const ahead = -clock.offset_ns, fast = -clock.drift_ppb / 1000;
  return {
    offset: ahead === 0 ? "0 ns" : `${ns(Math.abs(ahead))} ${ahead > 0 ? "ahead" : "behind"}`,
    drift: fast === 0 ? "0.00 ppm" : `${Math.abs(fast).toFixed(2)} ppm ${fast > 0 ? "fast" : "slow"}`,
  };
}

export function pct(fraction) {
  if (fraction === null || fraction === undefined || !Number.isFinite(fraction)) return "–";
  return (100 * fraction).toFixed(1) + "%";
}

export function bytes(value) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = value, u = 0;
  while (v >= 1024 && u < units.length - 1) { v /= 1024; ++u; }
  return (u === 0 ? v : v.toFixed(1)) + " " + units[u];
}

export function count(value) {
  return Number(value).toLocaleString("en-US");
}

export function when(ns_since_epoch) {
  if (!ns_since_epoch) return "–";
  return new Date(ns_since_epoch / 1e6).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}

// A kernel or operator name in `width` characters: what every C++ name repeats ("void ",
// anonymous namespaces) dropped, then cut.
export function shortName(name, width) {
  const plain = name.replace(/^void /, "").replaceAll("(anonymous namespace)::", "");
  return plain.length > width ? plain.slice(0, width - 1) + "…" : plain;
}

// The median as every report gives it (docs/analyses.md, "Medians"): the middle value, or the
// mean of the two middle values for an even count; 0 for none.
export function median(values) {
  if (!values.length) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

// Ranks as ranges: [0,1,2,5] -> "0-2, 5".
export function rankList(ranks) {
  const sorted = [...ranks].sort((a, b) => a - b);
  const parts = [];
  for (let i = 0; i < sorted.length; ) {
    let j = i;
    while (j + 1 < sorted.length && sorted[j + 1] === sorted[j] + 1) ++j;
    parts.push(i === j ? String(sorted[i]) : `${sorted[i]}-${sorted[j]}`);
    i = j + 1;
  }
  return parts.join(", ");
}

// A sortable, scrollable table: columns [{label, value: row => text|Node, num: bool, name: bool}]
// (name: a long name that may wrap anywhere, at a readable width).
export function table(columns, rows, options = {}) {
  const head = h("tr", {}, columns.map((c) => h("th", {scope: "col", class: c.num ? "num" : null}, c.label)));
  const body = h("tbody", {}, rows.map((row) => {
    const tr = h("tr", {class: options.rowClass ? options.rowClass(row) : null},
      columns.map((c) => h("td", {class: c.num ? "num" : c.name ? "name" : null}, c.value(row))));
    return tr;
  }));
  return h("div", {class: "table-wrap", tabindex: 0, role: "region", "aria-label": options.label || "table"},
    h("table", {}, options.caption ? h("caption", {}, options.caption) : null, h("thead", {}, head), body));
}
