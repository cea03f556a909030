#include "common/kineto/nccl_names.h"

#include <array>
#include <cctype>
#include <string>

#include "common/str_util.h"

namespace podscope::common {

bool IsNcclKernelName(std::string_view name) {
  if (name.starts_with("void ")) name.remove_prefix(5);
  return name.starts_with("nccl") || Contains(name, "ncclKernel") ||
         Contains(name, "ncclDevKernel");
}

NcclKernelInfo ParseNcclKernelName(std::string_view name) {
  static constexpr std::array<std::pair<std::string_view, CollectiveOp>, 9> kOps = {{
      {"AllReduce", CollectiveOp::kAllReduce},
      {"AllGather", CollectiveOp::kAllGather},
      {"ReduceScatter", CollectiveOp::kReduceScatter},
      {"Broadcast", CollectiveOp::kBroadcast},
      {"Reduce", CollectiveOp::kReduce},
      {"SendRecv", CollectiveOp::kSendRecv},
      {"Send", CollectiveOp::kSend},
      {"Recv", CollectiveOp::kRecv},
      {"AllToAll", CollectiveOp::kAllToAll},
  }};
  static constexpr std::array<std::string_view, 8> kAlgorithms = {
      "RING", "TREE", "COLLNET_DIRECT", "COLLNET_CHAIN", "COLLNET", "NVLS_TREE", "NVLS", "PAT"};
  static constexpr std::array<std::string_view, 3> kProtocols = {"LL128", "LL", "SIMPLE"};

  NcclKernelInfo info;
  if (name.starts_with("void ")) name.remove_prefix(5);
  name = name.substr(0, name.find('('));
  // Tokens after the "nccl...Kernel" prefix, e.g. AllReduce, RING, LL, Sum, float.
  std::vector<std::string_view> tokens;
  for (size_t start = 0;;) {
    const size_t end = name.find('_', start);
    tokens.push_back(name.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  for (size_t t = 1; t < tokens.size(); ++t) {
    std::string_view token = tokens[t];
    if (info.op == CollectiveOp::kUnknown) {
      for (const auto& [label, op] : kOps) {
        if (token == label) {
          info.op = op;
          break;
        }
      }
    }
    // Two-token algorithm names (COLLNET_DIRECT, NVLS_TREE) are matched on the joined pair.
    if (info.algorithm.empty() && t + 1 < tokens.size()) {
      const size_t offset = static_cast<size_t>(token.data() - name.data());
      std::string_view pair = name.substr(offset, token.size() + 1 + tokens[t + 1].size());
      for (std::string_view a : kAlgorithms) {
        if (pair == a) info.algorithm = a;
      }
      if (!info.algorithm.empty()) {
        ++t;
        continue;
      }
    }
    if (info.algorithm.empty()) {
      for (std::string_view a : kAlgorithms) {
        if (token == a) info.algorithm = a;
      }
    }
    if (info.protocol.empty()) {
      for (std::string_view p : kProtocols) {
        if (token == p) info.protocol = p;
      }
    }
  }
  return info;
}

CollectiveOp CollectiveOpFromName(std::string_view name) {
  // Normalise: lower case, drop "nccl:", "c10d::", leading underscores and separators.
  if (name.starts_with("nccl:")) name.remove_prefix(5);
  if (name.starts_with("c10d::")) name.remove_prefix(6);
  std::string n;
  n.reserve(name.size());
  for (char c : name) {
    if (c != '_' && c != ' ')
      n.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  auto starts = [&n](std::string_view p) { return n.starts_with(p); };
  if (starts("allreduce")) return CollectiveOp::kAllReduce;
  if (starts("allgather") || starts("gather")) return CollectiveOp::kAllGather;
  if (starts("reducescatter")) return CollectiveOp::kReduceScatter;
  if (starts("alltoall")) return CollectiveOp::kAllToAll;
  if (starts("broadcast")) return CollectiveOp::kBroadcast;
  if (starts("reduce")) return CollectiveOp::kReduce;
  if (starts("sendrecv")) return CollectiveOp::kSendRecv;
  if (starts("send")) return CollectiveOp::kSend;
  if (starts("recv")) return CollectiveOp::kRecv;
  if (starts("barrier")) return CollectiveOp::kBarrier;
  return CollectiveOp::kUnknown;
}

int DtypeSize(std::string_view dtype) {
  if (dtype.starts_with("c10::")) dtype.remove_prefix(5);
  if (dtype.starts_with("torch.")) dtype.remove_prefix(6);
  std::string d(dtype);
  for (char& c : d) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (d == "float" || d == "float32" || d == "int" || d == "int32" || d == "int32_t" ||
      d == "uint32" || d == "f32" || d == "i32" || d == "u32")
    return 4;
  if (d == "double" || d == "float64" || d == "long" || d == "long int" || d == "int64" ||
      d == "int64_t" || d == "uint64" || d == "uint64_t" || d == "f64" || d == "i64" || d == "u64")
    return 8;
  if (d == "half" || d == "float16" || d == "bfloat16" || d == "short" || d == "int16" ||
      d == "f16" || d == "bf16" || d == "__half" || d == "__nv_bfloat16")
    return 2;
  if (d == "byte" || d == "char" || d == "unsigned char" || d == "signed char" || d == "bool" ||
      d == "int8" || d == "uint8" || d == "int8_t" || d == "uint8_t" || d == "i8" || d == "u8" ||
      d == "float8_e4m3fn" || d == "float8_e5m2" || d == "f8e4m3" || d == "f8e5m2")
    return 1;
  return 0;
}

}  // namespace podscope::common
