#include "agent/probe/device_catalog.h"

#include <gtest/gtest.h>

namespace podscope::agent::probe {
namespace {

Harvest KernelsOn(std::initializer_list<int32_t> devices) {
  Harvest h;
  for (int32_t d : devices) h.trace.kernels.device.push_back(d);
  return h;
}

// Each device id is asked for once; one the describer does not know is not asked again; a
// window reports the devices its own kernels and copies ran on.
TEST(DeviceCatalogTest, DescribesEachDeviceOnceAndOnlyThoseAWindowUsed) {
  std::vector<std::vector<int32_t>> asked;
  const DeviceDescriber describer = [&](const std::vector<int32_t>& ids) {
    asked.push_back(ids);
    std::vector<common::DeviceInfo> out;
    for (int32_t id : ids) {
      if (id == 7) continue;  // the driver refuses it
      common::DeviceInfo d;
      d.id = id;
      d.name = "GPU " + std::to_string(id);
      out.push_back(d);
    }
    common::DeviceInfo stray;
    stray.id = 99;  // not asked for: ignored
    out.push_back(stray);
    return out;
  };
  DeviceCatalog catalog;
  std::vector<Harvest> first;
  first.push_back(KernelsOn({1, 0, 1}));
  first.push_back(Harvest{});
  first.back().trace.memcpys.device.push_back(7);
  std::vector<common::DeviceInfo> devices = catalog.For(first, describer);
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices[0].name, "GPU 0");
  EXPECT_EQ(devices[1].name, "GPU 1");
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(asked[0], (std::vector<int32_t>{0, 1, 7}));

  std::vector<Harvest> second;
  second.push_back(KernelsOn({1, 7, 2}));
  devices = catalog.For(second, describer);
  ASSERT_EQ(asked.size(), 2u);
  EXPECT_EQ(asked[1], (std::vector<int32_t>{2}));  // 1 is known, 7 was refused once
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices[0].id, 1);
  EXPECT_EQ(devices[1].id, 2);

  EXPECT_TRUE(catalog.For({Harvest{}}, describer).empty());   // no device work, no device
  EXPECT_TRUE(DeviceCatalog().For(second, nullptr).empty());  // no driver: nothing described
}

}  // namespace
}  // namespace podscope::agent::probe
