#include "http/http_types.h"

#include "common/json_writer.h"

namespace podscope::http {
namespace {

std::vector<std::string_view> Segments(std::string_view path) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < path.size()) {
    if (path[i] == '/') {
      ++i;
      continue;
    }
    const size_t end = path.find('/', i);
    out.push_back(path.substr(i, end == std::string_view::npos ? std::string_view::npos : end - i));
    if (end == std::string_view::npos) break;
    i = end;
  }
  return out;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string HttpRequest::Header(const std::string& name) const {
  auto it = headers.find(name);
  return it == headers.end() ? std::string() : it->second;
}

std::string HttpRequest::Query(const std::string& name, const std::string& fallback) const {
  auto it = query.find(name);
  return it == query.end() ? fallback : it->second;
}

HttpResponse HttpResponse::Json(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

HttpResponse HttpResponse::Problem(int status, std::string_view title, std::string_view detail) {
  common::JsonWriter w;
  w.BeginObject().Key("type").String("about:blank").Key("title").String(title);
  w.Key("status").Int(status).Key("detail").String(detail).EndObject().EndLine();
  HttpResponse r;
  r.status = status;
  r.content_type = "application/problem+json";
  r.body = std::move(w.buffer());
  return r;
}

std::string_view AccessName(Access access) {
  switch (access) {
    case Access::kOpen:
      return "open";
    case Access::kRead:
      return "read";
    case Access::kCapture:
      return "capture";
    case Access::kAdmin:
      return "admin";
  }
  return "admin";
}

bool Router::SetAccess(std::string_view method, std::string_view pattern, Access access) {
  for (Route& route : routes_) {
    if (route.method == method && route.pattern == pattern) {
      route.access = access;
      return true;
    }
  }
  return false;
}

const Route* Router::Match(std::string_view method, std::string_view path,
                           std::map<std::string, std::string>* params, bool* path_matched) const {
  *path_matched = false;
  const std::vector<std::string_view> parts = Segments(path);
  for (const Route& route : routes_) {
    const std::vector<std::string_view> pattern = Segments(route.pattern);
    if (pattern.size() != parts.size()) continue;
    std::map<std::string, std::string> found;
    bool ok = true;
    for (size_t i = 0; i < parts.size() && ok; ++i) {
      const size_t close = pattern[i].find('}');
      if (pattern[i].size() > 2 && pattern[i].front() == '{' && close != std::string_view::npos) {
        // "{id}" or "{id}:verb". A parameter never swallows a ':' verb ("{id}" must not match
        // "x:cancel"); "{id}:cancel" matches exactly "x:cancel".
        const std::string_view verb = pattern[i].substr(close + 1);
        std::string_view value = parts[i];
        if (!verb.empty()) {
          ok = value.size() > verb.size() && value.substr(value.size() - verb.size()) == verb;
          value = value.substr(0, value.size() - verb.size());
        }
        if (value.find(':') != std::string_view::npos || value.empty()) ok = false;
        found[std::string(pattern[i].substr(1, close - 1))] = std::string(value);
      } else {
        ok = pattern[i] == parts[i];
      }
    }
    if (!ok) continue;
    *path_matched = true;
    if (route.method != method) continue;
    *params = std::move(found);
    return &route;
  }
  return nullptr;
}

bool DecodeChunkedBody(std::string_view chunked, std::string* out) {
  out->clear();
  size_t at = 0;
  while (true) {
    const size_t line_end = chunked.find("\r\n", at);
    if (line_end == std::string_view::npos) return false;
    uint64_t size = 0;
    size_t digits = 0;
    for (size_t i = at; i < line_end && chunked[i] != ';'; ++i, ++digits) {
      const int v = HexValue(chunked[i]);
      if (v < 0 || digits >= 15) return false;
      size = size * 16 + static_cast<uint64_t>(v);
    }
    if (digits == 0) return false;
    at = line_end + 2;
    if (size == 0) return true;  // the last chunk (trailers, if any, are not needed)
    if (chunked.size() - at < size + 2 || chunked.substr(at + size, 2) != "\r\n") return false;
    out->append(chunked.substr(at, size));
    at += size + 2;
  }
}

bool PercentDecode(std::string_view in, std::string* out) {
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '%') {
      if (i + 2 >= in.size()) return false;
      const int hi = HexValue(in[i + 1]), lo = HexValue(in[i + 2]);
      if (hi < 0 || lo < 0) return false;
      out->push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (in[i] == '+') {
      out->push_back(' ');
    } else {
      out->push_back(in[i]);
    }
  }
  return true;
}

bool ParseQuery(std::string_view query, std::map<std::string, std::string>* out) {
  size_t i = 0;
  while (i <= query.size() && !query.empty()) {
    const size_t end = std::min(query.find('&', i), query.size());
    const std::string_view pair = query.substr(i, end - i);
    if (!pair.empty()) {
      const size_t eq = pair.find('=');
      std::string key, value;
      if (!PercentDecode(pair.substr(0, eq), &key)) return false;
      if (eq != std::string_view::npos && !PercentDecode(pair.substr(eq + 1), &value)) return false;
      (*out)[key] = value;
    }
    if (end == query.size()) break;
    i = end + 1;
  }
  return true;
}

}  // namespace podscope::http
