// The podscope web UI: a page per hash route, each built from REST API answers.
import * as api from "./api.js";
import {h, clear} from "./format.js";
import {workersPage, watchPage, alertsPage} from "./page_live.js";
import {capturesPage} from "./page_captures.js";
import {capturePage} from "./page_capture.js";
import {newCapturePage, rulesPage, schedulesPage} from "./page_forms.js";

const main = document.getElementById("main");

// A malformed %-escape in a hand-edited address is taken as it is, not a page that fails.
function decode(text) {
  try { return decodeURIComponent(text); } catch (_) { return text; }
}
let current = null;  // the page now shown: {stop()} ends its polling

const routes = [
  [/^#?\/?$/, () => workersPage],
  [/^#\/workers$/, () => workersPage],
  [/^#\/watch(?:\/(.+))?$/, (m) => (el) => watchPage(el, m[1] ? decode(m[1]) : "")],
  [/^#\/alerts$/, () => alertsPage],
  [/^#\/captures$/, () => capturesPage],
  [/^#\/capture\/(.+)$/, (m) => (el) => capturePage(el, decode(m[1]))],
  [/^#\/capture-new(?:\/(.+))?$/, (m) => (el) => newCapturePage(el, m[1] ? decode(m[1]) : "")],
  [/^#\/schedules$/, () => schedulesPage],
  [/^#\/rules$/, () => rulesPage],
];

function showSignIn() {
  // Already asking: a page's every refusal must not wipe what the user is typing.
  if (document.getElementById("token-input")) return;
  const session = clear(document.getElementById("session"));
  // Not offered to password managers: a token stays in this tab.
  const input = h("input", {type: "password", autocomplete: "off", placeholder: "bearer token",
    "aria-label": "bearer token", id: "token-input"});
  const form = h("form", {class: "row", onsubmit: (e) => {
    e.preventDefault();
    api.setToken(input.value);
    showSession();
    route();
  }}, input, h("button", {type: "submit"}, "Sign in"));
  session.append(form);
}

function showSession() {
  const session = clear(document.getElementById("session"));
  if (!api.token()) {
    showSignIn();
    return;
  }
  session.append(h("span", {}, "token set"),
    h("button", {type: "button", class: "secondary", onclick: () => { api.forgetToken(); showSignIn(); route(); }}, "Sign out"));
}

function route() {
  if (current && current.stop) current.stop();
  current = null;
  const hash = location.hash || "#/";
  clear(main);
  for (const a of document.querySelectorAll("nav a")) {
    const target = a.getAttribute("href");
    if (hash === target || hash.startsWith(target + "/")) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  for (const [pattern, make] of routes) {
    const m = pattern.exec(hash);
    if (m) {
      current = make(m)(main) || null;
      return;
    }
  }
  main.append(h("h1", {}, "Not found"), h("p", {}, "No page here. ", h("a", {href: "#/workers"}, "Go to the workers.")));
}

api.takeTokenFromAddress();
showSession();
window.addEventListener("podscope:unauthorized", showSignIn);
// The skip link moves the focus; it is not a route.
document.querySelector(".skip").addEventListener("click", (e) => { e.preventDefault(); main.focus(); });
window.addEventListener("hashchange", () => {
  api.takeTokenFromAddress();  // a link with "&token=" followed from within the page
  showSession();
  route();
  main.focus();
});
route();
