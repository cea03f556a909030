// Fuzz target for the probe link: the agent reads length-prefixed frames from a unix socket a
// piece at a time and parses each as a probe message. Any bytes, in any split, give messages or
// a final error; a hostile length never makes anyone allocate more than the bound.
#include <string>

#include "common/frame_codec.h"
#include "podscope/v1/probe.pb.h"
#include "tests/fuzz/fuzz_seeds.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  // The first byte says where the stream is split, as a socket read might.
  const size_t split = size == 0 ? 0 : 1 + data[0] % 97;
  podscope::common::FrameReader reader(1 << 16);
  for (size_t at = size == 0 ? 0 : 1; at < size; at += split) {
    reader.Append(bytes.substr(at, split));
    while (true) {
      absl::StatusOr<std::optional<std::string>> frame = reader.Next();
      if (!frame.ok() || !frame->has_value()) break;
      if ((*frame)->size() > (1u << 16)) __builtin_trap();  // the bound holds
      podscope::v1::ProbeMessage up;
      podscope::v1::AgentToProbe down;
      (void)up.ParseFromString(**frame);
      (void)down.ParseFromString(**frame);
    }
    if (reader.buffered() > size) __builtin_trap();
  }
  return 0;
}

namespace podscope::fuzz {

std::vector<std::string> Seeds(const std::vector<std::string>&) {
  std::vector<std::string> seeds;
  v1::ProbeMessage registration;
  registration.mutable_register_()->set_pid(4242);
  registration.mutable_register_()->set_rank(3);
  registration.mutable_register_()->set_job("fuzz-job");
  v1::AgentToProbe arm;
  arm.mutable_arm()->set_capture_id("cap-1");
  arm.mutable_arm()->set_start_host_ns(1'700'000'000'000'000'000);
  arm.mutable_arm()->set_stop_host_ns(1'700'000'002'000'000'000);
  for (const std::string& payload :
       {registration.SerializeAsString(), arm.SerializeAsString(), std::string()}) {
    std::string stream(1, '\x07');  // the split byte
    (void)common::AppendFrame(payload, 1 << 16, &stream);
    (void)common::AppendFrame(payload, 1 << 16, &stream);
    seeds.push_back(std::move(stream));
  }
  return seeds;
}

}  // namespace podscope::fuzz
