// The REST API, called with the user's bearer token. The token lives in this tab's
// sessionStorage only (gone when the tab closes); a link "#token=..." hands one over without
// it ever reaching a server (fragments are not sent) and is taken off the address at once.

const TOKEN_KEY = "podscope.token";

// A link's token replaces the tab's (the link is the sign-in). Tokens in links are URL-encoded.
export function takeTokenFromAddress() {
  const match = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (!match) return;
  let value = match[1];
  try { value = decodeURIComponent(value); } catch (_) { /* taken as it is */ }
  sessionStorage.setItem(TOKEN_KEY, value);
  const rest = location.hash.replace(/&token=[^&]*/, "").replace(/^#token=[^&]*&?/, "#");
  history.replaceState(null, "", location.pathname + location.search + (rest === "#" ? "" : rest));
}

export function token() { return sessionStorage.getItem(TOKEN_KEY) || ""; }
export function setToken(value) { sessionStorage.setItem(TOKEN_KEY, value.trim()); }
export function forgetToken() { sessionStorage.removeItem(TOKEN_KEY); }

// An answer that is not 2xx: what failed and what to do about it.
export class ApiError extends Error {
  constructor(status, title, detail, what) {
    super(`${what}: ${detail || title}`);
    this.status = status;
    this.title = title;
    this.detail = detail;
    this.what = what;
  }
  // What the user can do, by status.
  hint() {
    switch (this.status) {
      case 0: return "The coordinator did not answer. Check that it runs and that this page's address reaches it, then reload.";
      case 401: return "Your token was refused or is missing. Enter a token (Sign in, top right); an admin makes one with podscope-coordinator hash-token.";
      case 403: return "Your token's role is too small for this. Ask an admin for a token with the role named above.";
      case 404: return "It does not exist (any more). Go back to the list and pick another.";
      case 409: return "Wait for it to end, then try again.";
      case 413: return "The file is larger than the coordinator accepts (limits.max_upload_bytes).";
      case 429: return "The coordinator is busy with other captures of this job. Try again in a moment.";
      default: return this.status >= 500 ? "The coordinator failed. Its log names the cause." : "Check the values you entered.";
    }
  }
}

function headers(extra) {
  const out = {Accept: "application/json", ...extra};
  if (token()) out.Authorization = "Bearer " + token();
  return out;
}

async function failure(response, what) {
  let title = response.statusText, detail = "";
  try {
    const problem = await response.json();
    title = problem.title || title;
    detail = problem.detail || "";
  } catch (_) { /* not problem+json */ }
  return new ApiError(response.status, title, detail, what);
}

// GET/POST/PUT/DELETE `path` (JSON in, JSON out). `what` names the call in errors.
// Every call gives up after CALL_TIMEOUT_MS (a first analysis of millions of events takes
// seconds; a coordinator that says nothing for two minutes is not coming back).
const CALL_TIMEOUT_MS = 120000;

export async function call(method, path, body, what) {
  const label = what || `${method} ${path}`;
  let response;
  try {
    response = await fetch(path, {
      method,
      headers: headers(body === undefined ? {} : {"Content-Type": "application/json"}),
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
      signal: AbortSignal.timeout(CALL_TIMEOUT_MS),
    });
  } catch (e) {
    const timedOut = e && e.name === "TimeoutError";
    throw new ApiError(0, "unreachable", timedOut ? `no answer within ${CALL_TIMEOUT_MS / 1000} s` : String(e.message || e), label);
  }
  if (!response.ok) throw await failure(response, label);
  if (response.status === 204) return null;
  return response.json();
}

export const get = (path, what) => call("GET", path, undefined, what);

// Streams `path` into a file the browser saves as `filename`; onProgress(bytesSoFar).
export async function download(path, filename, onProgress) {
  let response;
  try {
    response = await fetch(path, {headers: headers({Accept: "*/*"}), cache: "no-store"});
  } catch (e) {
    throw new ApiError(0, "unreachable", String(e.message || e), "download");
  }
  if (!response.ok) throw await failure(response, "download");
  const reader = response.body.getReader();
  const parts = [];
  let received = 0;
  for (;;) {
    const {done, value} = await reader.read();
    if (done) break;
    parts.push(value);
    received += value.length;
    onProgress(received);
  }
  const url = URL.createObjectURL(new Blob(parts, {type: response.headers.get("Content-Type") || "application/octet-stream"}));
  const a = document.createElement("a");
  a.href = url;
  a.download = filename;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60000);
  return received;
}

// Uploads a File to `path` (streamed from disk by the browser); onProgress(fraction).
export function upload(path, file, onProgress) {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open("POST", path);
    for (const [name, value] of Object.entries(headers({"Content-Type": "application/octet-stream"}))) {
      xhr.setRequestHeader(name, value);
    }
    xhr.upload.onprogress = (e) => { if (e.lengthComputable) onProgress(e.loaded / e.total); };
    xhr.onerror = () => reject(new ApiError(0, "unreachable", "the upload did not reach the coordinator", "import"));
    xhr.onload = () => {
      let parsed = {};
      try { parsed = JSON.parse(xhr.responseText); } catch (_) { /* empty */ }
      if (xhr.status >= 200 && xhr.status < 300) resolve(parsed);
      else reject(new ApiError(xhr.status, parsed.title || xhr.statusText, parsed.detail || "", "import"));
    };
    xhr.send(file);
  });
}
