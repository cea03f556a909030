// Linked into the daemons (podscope-agent, podscope-coordinator) of sanitized builds only.
//
// gRPC's TLS runs OpenSSL on gRPC's own threads, some of them detached. When a daemon exits,
// such a thread can still be ending: OpenSSL frees its per-thread state (error queue, random
// generators) from the thread's exit handlers, after the thread has left the leak checker's
// view, and the exit-time leak check then reports those blocks as lost. It happens on some
// exits only, and upstream knows it with OpenSSL 3 (grpc/grpc#38539). ASan's fast unwinder
// stops at OpenSSL's first frame (Debian builds it without frame pointers), so such a report
// cannot be told apart by its caller: blocks allocated inside libcrypto are left out of the
// daemons' exit-time check as a whole.
//
// Our own OpenSSL objects are still checked: the code that makes them (common/tls_files.cc,
// common/client_connection.cc, coordinator/control/agent_certificates.cc) runs in unit-test
// processes, which this file is not linked into, and there a lost certificate or context fails.
extern "C" const char* __lsan_default_suppressions() { return "leak:libcrypto.so\n"; }
