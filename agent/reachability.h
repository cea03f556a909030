// Why the coordinator cannot be reached, in words: gRPC's channel only says it is in transient
// failure, so the agent tries a TCP connection itself and reports what the kernel said
// ("Connection refused" for a wrong or dead port, a resolver error for a wrong host name).
#pragma once

#include <string>

namespace podscope::agent {

// `target` is HOST:PORT (HOST may be [IPv6]); waits at most `timeout_ms`. Returns the reason a
// TCP connection failed, or a sentence saying it succeeded. Any thread.
std::string WhyUnreachable(const std::string& target, int timeout_ms, bool tls = false);

}  // namespace podscope::agent
