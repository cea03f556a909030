// A minimal streaming JSON writer: appends to a string buffer that the caller drains.
// Used where output is large (trace export) or must be byte-stable (CLI JSON), so no DOM.
#pragma once

#include <cassert>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace podscope::common {

// Not thread-safe. The writer tracks nesting and places every comma, brace and bracket itself:
// callers say Begin/End, Key and values. Output is compact JSON, byte-stable for a given sequence
// of calls. Misuse (an End that does not match its Begin, a Key not followed by a value, a value
// in an object without a Key) is caught by assertions in debug builds.
class JsonWriter {
 public:
  enum ArrayLayout : uint8_t {
    kCompact,
    // "[\n" first, ",\n" between elements and "\n]" last: a trace of millions of events stays
    // readable line by line, and tools that split on lines find one element per line.
    kOneElementPerLine,
  };

  // The text written so far (ask again after writing more). Streaming callers drain it
  // (ClearBuffer, or move it out) between values; the nesting state is kept apart from the text,
  // so draining mid-document loses nothing.
  std::string& buffer() {
    Flush();
    return buffer_;
  }
  size_t size() const { return buffer_.size() + staged_; }
  void ClearBuffer() {
    buffer_.clear();
    staged_ = 0;
  }

  JsonWriter& BeginObject() {
    char* p = PutValueSeparator(Room(3));
    *p++ = '{';
    Commit(p);
    Push(kObject);
    return *this;
  }
  JsonWriter& EndObject() {
    assert(!stack_.empty() && (frame_ & kObject) && "EndObject without BeginObject");
    assert(!(frame_ & kAwaitingValue) && "a Key without a value");
    char* p = Room(1);
    *p++ = '}';
    Commit(p);
    Pop();
    return *this;
  }
  JsonWriter& BeginArray(ArrayLayout layout = kCompact) {
    char* p = PutValueSeparator(Room(4));
    *p++ = '[';
    if (layout == kOneElementPerLine) *p++ = '\n';
    Commit(p);
    Push(layout == kOneElementPerLine ? kOnePerLine : 0);
    return *this;
  }
  JsonWriter& EndArray() {
    assert(!stack_.empty() && !(frame_ & kObject) && "EndArray without BeginArray");
    char* p = Room(2);
    if (frame_ & kOnePerLine) *p++ = '\n';
    *p++ = ']';
    Commit(p);
    Pop();
    return *this;
  }

  // A string literal, as a key or a value: its characters are checked when the program is built,
  // so it is copied as it is. One with a character to escape does not build: pass it as a
  // std::string_view.
  class Literal {
   public:
    template <size_t N>
    consteval Literal(const char (&text)[N]) : text_(text, std::char_traits<char>::length(text)) {
      if (text_.size() > kLongestLiteral) LiteralIsTooLong();
      for (const char c : text_) {
        if (!IsPlain(static_cast<unsigned char>(c))) LiteralNeedsEscaping();
      }
    }
    std::string_view text() const { return text_; }

   private:
    // Not constexpr: reaching either fails the build, with its name in the message.
    static void LiteralIsTooLong() {}
    static void LiteralNeedsEscaping() {}

    std::string_view text_;
  };
  // Text known only when the program runs (a name from the data), escaped. A template so that a
  // string literal takes the Literal overload instead.
  template <typename T>
  static constexpr bool kIsText =
      std::is_convertible_v<const T&, std::string_view> && !std::is_array_v<T>;

  // `"key":`, after a comma when the object already has a member.
  [[gnu::always_inline]] JsonWriter& Key(Literal key) {
    PutLiteral(/*key=*/true, key.text(), ':');
    return *this;
  }
  template <typename T>
  requires kIsText<T> JsonWriter& Key(const T& key) {
    PutQuoted(/*key=*/true, std::string_view(key), ":");
    return *this;
  }
  // `"key": `, with the space a reader that matches text rather than parsing JSON may need (HTA
  // finds a Kineto trace's rank by `"rank": `).
  JsonWriter& KeyWithSpace(std::string_view key) {
    PutQuoted(/*key=*/true, key, ": ");
    return *this;
  }

  // A quoted string, escaped (invalid UTF-8 bytes are replaced by U+FFFD).
  [[gnu::always_inline]] JsonWriter& String(Literal s) {
    PutLiteral(/*key=*/false, s.text(), '\0');
    return *this;
  }
  template <typename T>
  requires kIsText<T> JsonWriter& String(const T& s) {
    PutQuoted(/*key=*/false, std::string_view(s), {});
    return *this;
  }
  JsonWriter& Int(int64_t v);
  JsonWriter& Uint(uint64_t v);
  // A finite double in shortest round-trip form; non-finite values become null.
  JsonWriter& Double(double v);
  // Fixed-point with `decimals` digits (e.g. percentages rounded as documented); non-finite
  // values become null.
  JsonWriter& Fixed(double v, int decimals);
  // Nanoseconds as microseconds with three decimals: 1234567 -> 1234.567, exactly.
  JsonWriter& MicrosFromNanos(int64_t ns);
  JsonWriter& Bool(bool v) { return RawValue(v ? std::string_view("true") : "false"); }
  JsonWriter& Null() { return RawValue("null"); }
  // A whole value that is already JSON text (a document another module rendered), written as
  // one value: the writer places the comma before it, the text itself is not checked.
  JsonWriter& RawValue(std::string_view json) {
    Commit(PutValueSeparator(Room(2)));
    Append(json);
    return *this;
  }

  // A line break after a whole top-level value: a document that ends in a newline, or JSON Lines
  // (the next top-level value starts afresh, without a comma).
  JsonWriter& EndLine() {
    assert(stack_.empty() && "EndLine inside an object or array");
    char* p = Room(1);
    *p++ = '\n';
    Commit(p);
    frame_ = 0;
    return *this;
  }

 private:
  // A container's state (frame_ for the innermost one, stack_ for those around it).
  static constexpr uint8_t kHasElement = 1;     // a comma goes before the next member/element
  static constexpr uint8_t kAwaitingValue = 2;  // a Key was written; its value comes next
  static constexpr uint8_t kObject = 4;
  static constexpr uint8_t kOnePerLine = 8;

  static constexpr size_t kLongestLiteral = 256;
  // The bytes a JSON string holds as they are: printable ASCII but the quote and the backslash.
  static constexpr bool IsPlain(unsigned char c) {
    return c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
  }

  // Writes what goes before the next value at p: nothing (the first element, or after a Key), ","
  // or ",\n".
  char* PutValueSeparator(char* p) {
    const uint8_t f = frame_;
    assert((!(f & kObject) || (f & kAwaitingValue)) && "a value in an object without a Key");
    assert((!stack_.empty() || !(f & kHasElement)) && "two top-level values without EndLine");
    frame_ = static_cast<uint8_t>((f | kHasElement) & ~kAwaitingValue);
    if ((f & (kHasElement | kAwaitingValue)) == kHasElement) {
      *p++ = ',';
      if (f & kOnePerLine) *p++ = '\n';
    }
    return p;
  }
  char* PutKeySeparator(char* p) {
    assert((frame_ & kObject) && "a Key outside an object");
    assert(!(frame_ & kAwaitingValue) && "a Key without a value");
    if (frame_ & kHasElement) *p++ = ',';
    frame_ |= kHasElement | kAwaitingValue;
    return p;
  }
  void Push(uint8_t frame) {
    stack_.push_back(frame_);
    frame_ = frame;
  }
  void Pop() {
    frame_ = stack_.back();
    stack_.pop_back();
  }

  // Small pieces are staged and reach buffer_ a few hundred bytes at a time: callers write
  // millions of small values, and every append to a std::string has a fixed cost.
  static constexpr size_t kStagingBytes = 1024;
  // Room for n (at most kStagingBytes) more staged bytes, at the returned pointer.
  char* Room(size_t n) {
    assert(n <= kStagingBytes);
    if (kStagingBytes - staged_ < n) Flush();
    return staging_ + staged_;
  }
  void Commit(char* end) { staged_ = static_cast<size_t>(end - staging_); }
  void Flush();  // out of line: the inline writers stay small enough to inline
  void Append(std::string_view s) {
    if (s.size() <= kStagingBytes - staged_) {
      std::memcpy(staging_ + staged_, s.data(), s.size());
      staged_ += s.size();
    } else {
      Flush();
      buffer_.append(s);
    }
  }
  // The separator a key or a value takes, then text (plain) quoted, then colon unless it is '\0'.
  // Always inlined: the literal's length is then known where it is written, and the copy is a few
  // moves (keys are most of a trace's calls).
  [[gnu::always_inline]] void PutLiteral(bool key, std::string_view text, char colon) {
    char* p = Room(text.size() + 5);
    p = key ? PutKeySeparator(p) : PutValueSeparator(p);
    *p++ = '"';
    std::memcpy(p, text.data(), text.size());
    p += text.size();
    *p++ = '"';
    if (colon != '\0') *p++ = colon;
    Commit(p);
  }
  // The separator a key or a value takes, then s quoted and escaped, then tail (at most 2 bytes).
  void PutQuoted(bool key, std::string_view s, std::string_view tail);
  void AppendEscaped(std::string_view s, size_t plain);

  std::string buffer_;
  uint8_t frame_ = 0;  // the top level: neither an object nor an array
  std::vector<uint8_t> stack_;
  size_t staged_ = 0;
  char staging_[kStagingBytes];
};

}  // namespace podscope::common
