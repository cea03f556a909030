// What every page is built of: panels that load with progress and fail with a clear error,
// the status line, and polling that stops when the page is left.
import * as api from "./api.js";
import {h} from "./format.js";

// A panel that loads: shows elapsed time while it waits and an error naming what failed and
// what to do. load() returns the panel's content.
export function panel(title, load, {wide = false} = {}) {
  const body = h("div", {class: "progress"}, h("progress", {"aria-label": `loading ${title}`}), "loading…");
  const section = h("section", {class: "panel" + (wide ? " wide" : ""), "aria-busy": "true"}, title ? h("h2", {}, title) : null, body);
  const started = performance.now();
  const ticker = setInterval(() => {
    const s = ((performance.now() - started) / 1000).toFixed(0);
    body.lastChild.textContent = `loading… ${s} s (a capture's first view computes its analyses; later views are cached)`;
  }, 1000);
  Promise.resolve()
    .then(load)
    .then((content) => {
      clearInterval(ticker);
      section.replaceChild(h("div", {}, content), body);
      performance.mark(`podscope:loaded:${title}`);
    })
    .catch((e) => { clearInterval(ticker); section.replaceChild(errorBox(e), body); })
    .finally(() => section.setAttribute("aria-busy", "false"));
  return section;
}

export function errorBox(e) {
  if (e instanceof api.ApiError) {
    if (e.status === 401) window.dispatchEvent(new Event("podscope:unauthorized"));
    return h("div", {class: "error", role: "alert"}, h("strong", {}, e.message), e.hint());
  }
  console.warn(e);
  return h("div", {class: "error", role: "alert"}, h("strong", {}, String(e && e.message ? e.message : e)),
    "This page failed to show it; reload, and report it with the coordinator's version if it stays.");
}

export function status(text) {
  document.getElementById("status").textContent = text;
}

// A page that polls: calls tick() now and every `ms`, until the page is left.
export function every(ms, tick) {
  let stopped = false, timer = null;
  const run = async () => {
    if (stopped) return;
    try { await tick(); } catch (e) { status(`refresh failed: ${e.message}`); }
    if (!stopped) timer = setTimeout(run, ms);
  };
  run();
  return {stop() { stopped = true; clearTimeout(timer); }};
}

