#include "common/trace_model.h"

namespace podscope::common {

std::string_view KernelClassName(KernelClass c) {
  switch (c) {
    case KernelClass::kCompute:
      return "compute";
    case KernelClass::kCommunication:
      return "communication";
    case KernelClass::kSync:
      return "sync";
  }
  return "unknown";
}

std::string_view MemcpyKindName(MemcpyKind k) {
  switch (k) {
    case MemcpyKind::kUnknown:
      return "unknown";
    case MemcpyKind::kHostToDevice:
      return "HtoD";
    case MemcpyKind::kDeviceToHost:
      return "DtoH";
    case MemcpyKind::kDeviceToDevice:
      return "DtoD";
    case MemcpyKind::kPeerToPeer:
      return "PtoP";
    case MemcpyKind::kHostToHost:
      return "HtoH";
    case MemcpyKind::kMemset:
      return "memset";
  }
  return "unknown";
}

std::string_view HostSpanCategoryName(HostSpanCategory c) {
  switch (c) {
    case HostSpanCategory::kOp:
      return "op";
    case HostSpanCategory::kAnnotation:
      return "annotation";
    case HostSpanCategory::kInput:
      return "input";
    case HostSpanCategory::kOptimizer:
      return "optimizer";
    case HostSpanCategory::kPython:
      return "python";
    case HostSpanCategory::kGpuAnnotation:
      return "gpu_annotation";
  }
  return "unknown";
}

std::string_view CollectiveOpName(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kUnknown:
      return "unknown";
    case CollectiveOp::kAllReduce:
      return "AllReduce";
    case CollectiveOp::kAllGather:
      return "AllGather";
    case CollectiveOp::kReduceScatter:
      return "ReduceScatter";
    case CollectiveOp::kBroadcast:
      return "Broadcast";
    case CollectiveOp::kReduce:
      return "Reduce";
    case CollectiveOp::kAllToAll:
      return "AllToAll";
    case CollectiveOp::kSend:
      return "Send";
    case CollectiveOp::kRecv:
      return "Recv";
    case CollectiveOp::kSendRecv:
      return "SendRecv";
    case CollectiveOp::kBarrier:
      return "Barrier";
  }
  return "unknown";
}

}  // namespace podscope::common
