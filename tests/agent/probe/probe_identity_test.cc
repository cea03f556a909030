#include "agent/probe/probe_identity.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace podscope::agent::probe {
namespace {

ProbeIdentity From(const std::map<std::string, std::string>& env) {
  return IdentityFromEnvironment([&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(ProbeIdentityTest, TorchrunVariables) {
  const ProbeIdentity id = From({{"RANK", "13"},
                                 {"LOCAL_RANK", "5"},
                                 {"WORLD_SIZE", "32"},
                                 {"TORCHELASTIC_RUN_ID", "run-7"}});
  EXPECT_EQ(id.rank, 13);
  EXPECT_EQ(id.local_rank, 5);
  EXPECT_EQ(id.world_size, 32);
  EXPECT_EQ(id.job, "run-7");
}

TEST(ProbeIdentityTest, SlurmVariablesAndTorchrunWinningUnderSrun) {
  const ProbeIdentity slurm = From({{"SLURM_PROCID", "3"},
                                    {"SLURM_LOCALID", "1"},
                                    {"SLURM_NTASKS", "8"},
                                    {"SLURM_JOB_ID", "4242"}});
  EXPECT_EQ(slurm.rank, 3);
  EXPECT_EQ(slurm.local_rank, 1);
  EXPECT_EQ(slurm.world_size, 8);
  EXPECT_EQ(slurm.job, "4242");
  const ProbeIdentity both = From(
      {{"RANK", "9"}, {"SLURM_PROCID", "0"}, {"SLURM_JOB_ID", "4242"}, {"PODSCOPE_JOB", "llama"}});
  EXPECT_EQ(both.rank, 9);
  EXPECT_EQ(both.job, "llama");  // the explicit job name wins
}

TEST(ProbeIdentityTest, NothingUsableMeansUnknown) {
  const ProbeIdentity none = From({});
  EXPECT_EQ(none.rank, -1);
  EXPECT_EQ(none.local_rank, -1);
  EXPECT_EQ(none.world_size, -1);
  EXPECT_EQ(none.job, "");
  // Not numbers, negative, trailing junk, a world of zero, an empty job: all unset, and the
  // next variable in line is used instead.
  const ProbeIdentity bad = From({{"RANK", "x1"},
                                  {"SLURM_PROCID", "2"},
                                  {"LOCAL_RANK", "-1"},
                                  {"WORLD_SIZE", "0"},
                                  {"SLURM_NTASKS", "4 "},
                                  {"PODSCOPE_JOB", ""},
                                  {"SLURM_JOB_ID", "77"}});
  EXPECT_EQ(bad.rank, 2);
  EXPECT_EQ(bad.local_rank, -1);
  EXPECT_EQ(bad.world_size, -1);
  EXPECT_EQ(bad.job, "77");
}

TEST(ProbeIdentityTest, TheDeviceIsThePhysicalGpuOfTheLocalRank) {
  auto device = [](int32_t local_rank, const std::map<std::string, std::string>& env) {
    return DeviceFromEnvironment(local_rank, [&](const char* name) -> const char* {
      auto it = env.find(name);
      return it == env.end() ? nullptr : it->second.c_str();
    });
  };
  EXPECT_EQ(device(3, {}), "cuda:3");
  EXPECT_EQ(device(-1, {}), "");
  EXPECT_EQ(device(1, {{"CUDA_VISIBLE_DEVICES", "4,5"}}), "cuda:5");
  EXPECT_EQ(device(1, {{"CUDA_VISIBLE_DEVICES", "6"}}), "cuda:6") << "one GPU listed: that one";
  EXPECT_EQ(device(0, {{"CUDA_VISIBLE_DEVICES", "GPU-8f3a,GPU-77b1"}}), "GPU-8f3a");
  EXPECT_EQ(device(5, {{"CUDA_VISIBLE_DEVICES", "0,1"}}), "") << "beyond the list";
}

}  // namespace
}  // namespace podscope::agent::probe
