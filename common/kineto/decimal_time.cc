#include "common/kineto/decimal_time.h"

#include <bit>
#include <cstring>
#include <limits>

namespace podscope::common {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsJsonSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// Eight ASCII digits at `p` as their value, or -1 when any of the eight is not a digit: one load
// and three multiplies in place of eight dependent steps (epoch microseconds have 16 digits).
int64_t EightDigits(const char* p) {
  uint64_t chunk;
  std::memcpy(&chunk, p, 8);
  // A byte is a digit when its high nibble is 3 and adding 6 keeps it there (0x30..0x39).
  if ((chunk & 0xF0F0F0F0F0F0F0F0) != 0x3030303030303030 ||
      ((chunk + 0x0606060606060606) & 0xF0F0F0F0F0F0F0F0) != 0x3030303030303030) {
    return -1;
  }
  chunk -= 0x3030303030303030;
  if constexpr (std::endian::native == std::endian::big) chunk = __builtin_bswap64(chunk);
  // Pairs, then quads, then the eight: the first byte is the most significant digit.
  chunk = (chunk * 10 + (chunk >> 8)) & 0x00FF00FF00FF00FF;
  chunk = (chunk * 100 + (chunk >> 16)) & 0x0000FFFF0000FFFF;
  chunk = (chunk * 10000 + (chunk >> 32)) & 0x00000000FFFFFFFF;
  return static_cast<int64_t>(chunk);
}

}  // namespace

bool ParseMicrosAsNanos(std::string_view token, int64_t* nanos) {
  // Fast path for what profilers write: up to 16 integer digits (epoch microseconds) and up
  // to 3 decimals, followed by the end or whitespace. At most 19 digits fit an unsigned
  // 64-bit value; everything else takes the general path below.
  {
    const char* p = token.data();
    const char* end = p + token.size();
    uint64_t value = 0;
    const char* digits_start = p;
    for (int block = 0; block < 2 && end - p >= 8; ++block) {
      const int64_t eight = EightDigits(p);
      if (eight < 0) break;
      value = value * 100000000 + static_cast<uint64_t>(eight);
      p += 8;
    }
    while (p < end && IsDigit(*p) && p - digits_start < 16) value = value * 10 + (*p++ - '0');
    if (p > digits_start && (p == digits_start + 1 || *digits_start != '0')) {
      int frac = 0;
      bool ok = true;
      if (p < end && *p == '.') {
        ++p;
        while (p < end && IsDigit(*p) && frac < 3) {
          value = value * 10 + (*p++ - '0');
          ++frac;
        }
        ok = frac > 0 && (p == end || !IsDigit(*p));
      }
      while (ok && p < end && IsJsonSpace(*p)) ++p;  // raw tokens end in the space before a comma
      if (ok && p == end) {
        static constexpr uint64_t kScale[] = {1000, 100, 10, 1};
        // value < 10^19 and value * scale < 10^19 < 2^64: no wrap before the range check.
        const uint64_t scaled = value * kScale[frac];
        if (scaled <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
          *nanos = static_cast<int64_t>(scaled);
          return true;
        }
      }
    }
  }
  while (!token.empty() && IsJsonSpace(token.back())) token.remove_suffix(1);
  size_t i = 0;
  const size_t n = token.size();
  bool negative = false;
  if (i < n && token[i] == '-') {
    negative = true;
    ++i;
  }
  if (i == n || !IsDigit(token[i])) return false;
  // Up to 36 significant digits fit in an unsigned 128-bit mantissa with room to spare.
  unsigned __int128 mantissa = 0;
  int significant = 0;
  int dropped = 0;  // integer digits beyond the mantissa's capacity (scale up by these)
  auto take_digit = [&](char c) {
    if (significant < 36) {
      mantissa = mantissa * 10 + static_cast<unsigned>(c - '0');
      if (mantissa != 0) ++significant;
      return true;
    }
    return false;
  };
  if (token[i] == '0') {
    ++i;
  } else {
    while (i < n && IsDigit(token[i])) {
      if (!take_digit(token[i])) ++dropped;
      ++i;
    }
  }
  int frac_digits = 0;
  if (i < n && token[i] == '.') {
    ++i;
    if (i == n || !IsDigit(token[i])) return false;
    while (i < n && IsDigit(token[i])) {
      if (take_digit(token[i])) ++frac_digits;
      ++i;
    }
  }
  int exponent = 0;
  if (i < n && (token[i] == 'e' || token[i] == 'E')) {
    ++i;
    bool exp_negative = false;
    if (i < n && (token[i] == '+' || token[i] == '-')) {
      exp_negative = token[i] == '-';
      ++i;
    }
    if (i == n || !IsDigit(token[i])) return false;
    while (i < n && IsDigit(token[i])) {
      if (exponent < 10000) exponent = exponent * 10 + (token[i] - '0');
      ++i;
    }
    if (exp_negative) exponent = -exponent;
  }
  if (i != n) return false;

  // value_ns = mantissa * 10^(exponent + dropped + 3 - frac_digits)
  int scale = exponent + dropped + 3 - frac_digits;
  constexpr auto kMax = static_cast<unsigned __int128>(std::numeric_limits<int64_t>::max());
  if (mantissa == 0) {
    *nanos = 0;
    return true;
  }
  if (scale >= 0) {
    for (; scale > 0; --scale) {
      mantissa *= 10;
      if (mantissa > kMax + 1) return false;
    }
  } else {
    if (scale < -38) {
      mantissa = 0;
    } else {
      unsigned __int128 divisor = 1;
      for (int k = 0; k < -scale; ++k) divisor *= 10;
      const unsigned __int128 quotient = mantissa / divisor;
      const unsigned __int128 remainder = mantissa % divisor;
      mantissa = quotient + (remainder * 2 >= divisor ? 1 : 0);
    }
  }
  if (mantissa > kMax + (negative ? 1 : 0)) return false;
  *nanos = negative ? static_cast<int64_t>(0 - static_cast<uint64_t>(mantissa))
                    : static_cast<int64_t>(mantissa);
  return true;
}

}  // namespace podscope::common
