// Forms: trigger a capture, schedule captures, edit the alert rules.
import * as api from "./api.js";
import {h, clear, put, count, table, when} from "./format.js";
import {panel, errorBox, every} from "./widgets.js";

function field(id, label, input) {
  input.id = id;
  return [h("label", {for: id}, label), input];
}

// "0-3, 8" -> [0,1,2,3,8]; throws naming the bad part.
function parseRanks(text) {
  const out = [];
  for (const part of text.split(",").map((p) => p.trim()).filter(Boolean)) {
    const m = /^(\d+)(?:-(\d+))?$/.exec(part);
    if (!m) throw new Error(`"${part}" is not a rank or a range like 0-7`);
    const a = Number(m[1]), b = m[2] === undefined ? a : Number(m[2]);
    if (b < a || b - a > 100000) throw new Error(`"${part}" is not a range from low to high`);
    for (let r = a; r <= b; ++r) out.push(r);
  }
  return out;
}

export function newCapturePage(main, job) {
  main.append(h("h1", {}, "New capture"));
  const jobInput = h("input", {type: "text", required: true, maxlength: 128, value: job, placeholder: "job name"});
  const ranks = h("input", {type: "text", placeholder: "all ranks (or e.g. 0-7, 12)"});
  const duration = h("input", {type: "number", required: true, min: 1, max: 600000, value: 2000});
  const delay = h("input", {type: "number", min: 0, value: 0});
  const result = h("div", {"aria-live": "polite"});
  const button = h("button", {type: "submit"}, "Start capture");
  const form = h("form", {class: "form", id: "capture-form", onsubmit: async (e) => {
    e.preventDefault();
    const request = {job: jobInput.value.trim(), duration_ms: Number(duration.value)};
    try {
      if (ranks.value.trim()) request.ranks = parseRanks(ranks.value);
    } catch (err) {
      put(result, h("div", {class: "error", role: "alert"}, h("strong", {}, `Ranks: ${err.message}`), "Write ranks as 0-7, 12 or leave the field empty for every rank."));
      return;
    }
    if (Number(delay.value) > 0) request.delay_ms = Number(delay.value);
    button.disabled = true;
    put(result, h("p", {class: "progress"}, h("progress"), "asking the agents…"));
    try {
      const c = await api.call("POST", "/v1/captures", request, `start a capture of job ${request.job}`);
      location.hash = `#/capture/${encodeURIComponent(c.id)}`;
    } catch (err) {
      put(result, errorBox(err));
    } finally {
      button.disabled = false;
    }
  }},
  field("capture-job", "Job", jobInput),
  field("capture-ranks", "Ranks", ranks),
  field("capture-duration", "Duration (ms)", duration),
  field("capture-delay", "Extra delay (ms)", delay),
  h("div", {class: "wide row"}, button, h("span", {class: "muted"}, "Needs a capture token. Every agent serving the job captures the same window on its aligned clock.")),
  h("div", {class: "wide"}, result));
  main.append(h("section", {class: "panel"}, form));
  return null;
}

export function schedulesPage(main) {
  main.append(h("h1", {}, "Scheduled captures"));
  const list = h("div");
  const job = h("input", {type: "text", required: true, maxlength: 128});
  const everyS = h("input", {type: "number", required: true, min: 10, max: 604800, value: 600});
  const duration = h("input", {type: "number", required: true, min: 1, value: 2000});
  const result = h("div", {"aria-live": "polite"});
  const form = h("form", {class: "form", onsubmit: async (e) => {
    e.preventDefault();
    try {
      await api.call("POST", "/v1/schedules", {job: job.value.trim(), every_s: Number(everyS.value), duration_ms: Number(duration.value)},
        `schedule captures of job ${job.value}`);
      put(result, h("p", {}, "Scheduled."));
      await poll.now();
    } catch (err) {
      put(result, errorBox(err));
    }
  }},
  field("schedule-job", "Job", job), field("schedule-every", "Every (s)", everyS), field("schedule-duration", "Duration (ms)", duration),
  h("div", {class: "wide"}, h("button", {type: "submit"}, "Add schedule")), h("div", {class: "wide"}, result));
  main.append(h("section", {class: "panel"}, h("h2", {}, "Schedules"), list), h("section", {class: "panel"}, h("h2", {}, "Add one"), form));
  async function tick() {
    try {
      const r = await api.get("/v1/schedules", "list schedules");
      put(list, r.schedules.length === 0 ? h("p", {}, "No schedule.") : table([
        {label: "schedule", value: (s) => s.id},
        {label: "job", value: (s) => s.job},
        {label: "every", num: true, value: (s) => `${s.every_s} s`},
        {label: "duration", num: true, value: (s) => `${s.duration_ms} ms`},
        {label: "last capture", value: (s) => s.last_capture_id ? h("a", {href: `#/capture/${encodeURIComponent(s.last_capture_id)}`}, s.last_capture_id) : "–"},
        {label: "next", num: true, value: (s) => s.next_ns ? when(s.next_ns) : "–"},
        {label: "", value: (s) => h("button", {type: "button", class: "secondary", "aria-label": `delete schedule ${s.id}`, onclick: async () => {
          try {
            await api.call("DELETE", `/v1/schedules/${encodeURIComponent(s.id)}`, undefined, `delete schedule ${s.id}`);
            await tick();
          } catch (err) {
            put(result, errorBox(err));
          }
        }}, "Delete")},
      ], r.schedules, {label: "schedules"}));
    } catch (e) {
      put(list, errorBox(e));
    }
  }
  const poll = every(10000, tick);
  poll.now = tick;
  return poll;
}

export function rulesPage(main) {
  main.append(h("h1", {}, "Alert rules"));
  main.append(panel("", async () => {
    const rules = await api.get("/v1/alerts/rules", "read the alert rules");
    const text = h("textarea", {id: "rules-text", spellcheck: "false", "aria-label": "alert rules (JSON)"});
    text.value = JSON.stringify(rules, null, 2);
    const result = h("div", {"aria-live": "polite"});
    const save = h("button", {type: "submit"}, "Save rules");
    const summary = h("div");
    const describe = (r) => put(summary, table([
      {label: "rule", value: (x) => x.name},
      {label: "kind", value: (x) => x.kind},
      {label: "enabled", value: (x) => (x.enabled ? "yes" : "no")},
      {label: "job", value: (x) => x.job || "every job"},
      {label: "fires after", value: (x) => x.hysteresis ? `${x.hysteresis.fire_after} of ${x.hysteresis.of_windows} windows` : "–"},
      {label: "evidence capture", value: (x) => (x.capture_evidence ? "yes" : "no")},
    ], r.rules, {label: "rules"}));
    describe(rules);
    const form = h("form", {onsubmit: async (e) => {
      e.preventDefault();
      let parsed;
      try {
        parsed = JSON.parse(text.value);
      } catch (err) {
        put(result, h("div", {class: "error", role: "alert"}, h("strong", {}, `Not JSON: ${err.message}`), "Fix the text and save again; nothing was changed."));
        return;
      }
      save.disabled = true;
      try {
        const stored = await api.call("PUT", "/v1/alerts/rules", parsed, "save the alert rules");
        text.value = JSON.stringify(stored, null, 2);
        describe(stored);
        put(result, h("p", {}, `Saved ${count(stored.rules.length)} rules; alerts of changed or removed rules resolve.`));
      } catch (err) {
        put(result, errorBox(err));
      } finally {
        save.disabled = false;
      }
    }}, text, h("div", {class: "row"}, save, h("span", {class: "muted"}, "Needs an admin token. The coordinator checks every key and names a bad one.")), result);
    return [summary, h("h2", {}, "Edit"), form];
  }));
  return null;
}
