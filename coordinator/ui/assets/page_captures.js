// The capture list, and importing trace files.
import * as api from "./api.js";
import {h, clear, put, ns, count, bytes, when, table} from "./format.js";
import {every, errorBox} from "./widgets.js";
import {unreachableNote} from "./page_live.js";

const kShown = 1000;
const kMaxPages = 50;

// The newest kShown captures: the API lists by id (oldest first for live captures, imports
// after them), so every page is read, up to kMaxPages of 1000.
async function newestCaptures() {
  const all = [];
  const unreachable = new Set();
  let after = "", pages = 0;
  for (; pages < kMaxPages; ++pages) {
    const q = new URLSearchParams({limit: "1000"});
    if (after) q.set("after", after);
    const page = await api.get(`/v1/captures?${q}`, "list captures");
    all.push(...page.captures);
    for (const shard of page.unreachable_shards || []) unreachable.add(shard);
    if (!page.next_after) break;
    after = page.next_after;
  }
  all.sort((a, b) => b.created_ns - a.created_ns);
  return {rows: all.slice(0, kShown), total: all.length, more: pages === kMaxPages, unreachable};
}

export function stateBadge(state) {
  const kind = {complete: "good", partial: "warn", failed: "bad", cancelled: "neutral"}[state] || "neutral";
  return h("span", {class: `badge ${kind}`}, state);
}

function importForm(onDone) {
  const files = h("input", {type: "file", multiple: true, accept: ".json,.gz,application/json,application/gzip", id: "import-files"});
  const job = h("input", {type: "text", id: "import-job", value: "imported", maxlength: 128});
  const progress = h("div", {"aria-live": "polite"});
  const button = h("button", {type: "submit"}, "Import");
  const form = h("form", {class: "form", onsubmit: async (e) => {
    e.preventDefault();
    if (!files.files.length) {
      put(progress, h("div", {class: "error"}, "Choose one or more trace files first (one Kineto JSON per rank, gzip or not)."));
      return;
    }
    button.disabled = true;
    let capture = "";
    try {
      const list = [...files.files];
      for (const [i, file] of list.entries()) {
        const bar = h("progress", {max: 1, value: 0});
        put(progress, h("span", {class: "progress"}, bar, `uploading ${file.name} (${i + 1} of ${list.length}, ${bytes(file.size)})…`));
        const q = new URLSearchParams({job: job.value || "imported", name: file.name});
        if (capture) q.set("capture", capture);
        const r = await api.upload(`/v1/captures:import?${q}`, file, (f) => { bar.value = f; if (f >= 1) bar.removeAttribute("value"); });
        capture = r.id;
      }
      put(progress, h("p", {}, "Imported into ", h("a", {href: `#/capture/${encodeURIComponent(capture)}`}, capture), "."));
      onDone();
    } catch (err) {
      put(progress, errorBox(err));
    } finally {
      button.disabled = false;
    }
  }},
  h("label", {for: "import-files"}, "Trace files"), files,
  h("label", {for: "import-job"}, "Job"), job,
  h("div", {class: "wide row"}, button, h("span", {class: "muted"}, "Needs an admin token. Every file becomes one worker of one capture.")),
  h("div", {class: "wide"}, progress));
  return form;
}

export function capturesPage(main) {
  main.append(h("h1", {}, "Captures"));
  const list = h("div");
  let shown = 0;
  main.append(
    h("div", {class: "row"}, h("a", {href: "#/capture-new"}, "New capture"), h("span", {class: "muted"}, "Newest first; refreshed every 10 s.")),
    h("section", {class: "panel"}, h("h2", {}, "All captures"), list),
    h("section", {class: "panel"}, h("h2", {}, "Import trace files"), importForm(() => poll.now())));
  async function tick() {
    let got;
    try {
      got = await newestCaptures();
    } catch (e) {
      put(list, errorBox(e));
      return;
    }
    const rows = got.rows;
    shown = rows.length;
    put(list, unreachableNote(got.unreachable), rows.length === 0 ? h("p", {}, "No capture yet. Start one (New capture) or import trace files below.")
      : table([
        {label: "capture", value: (c) => h("a", {href: `#/capture/${encodeURIComponent(c.id)}`}, c.id)},
        {label: "state", value: (c) => stateBadge(c.state)},
        {label: "job", value: (c) => c.job},
        {label: "workers", num: true, value: (c) => count(c.workers.length)},
        {label: "events", num: true, value: (c) => count(c.events)},
        {label: "window", num: true, value: (c) => c.window ? ns(c.window.duration_ns) : "–"},
        {label: "created", num: true, value: (c) => when(c.created_ns)},
        {label: "stored", num: true, value: (c) => bytes(c.stored_bytes)},
      ], rows, {label: "captures", caption: got.total > shown || got.more
        ? `the newest ${count(shown)} of ${got.more ? "more than " : ""}${count(got.total)} captures; podscope captures lists all` : null}));
  }
  const poll = every(10000, tick);
  poll.now = tick;
  return poll;
}
