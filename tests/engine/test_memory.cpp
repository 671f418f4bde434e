#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "easel_config.h"
#include "engine/arena.hpp"
#include "engine/memory.hpp"

namespace easel {
namespace {

bool aligned64(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 64 == 0;
}

void touch(const Buffer& b) {
  ASSERT_NE(b.data(), nullptr);
  std::memset(b.data(), 0xab, b.bytes());
  EXPECT_EQ(static_cast<unsigned char*>(b.data())[b.bytes() - 1], 0xab);
}

TEST(Memory, KindNamesRoundTrip) {
  for (MemKind k : {MemKind::dram, MemKind::hbw, MemKind::hbw_preferred, MemKind::interleave,
                    MemKind::pinned_host, MemKind::device}) {
    auto parsed = parse_mem_kind(mem_kind_name(k));
    ASSERT_TRUE(parsed.ok()) << mem_kind_name(k);
    EXPECT_EQ(*parsed, k);
  }
  EXPECT_STREQ(mem_kind_name(MemKind::hbw_preferred), "hbw-preferred");
  EXPECT_STREQ(mem_kind_name(MemKind::pinned_host), "pinned-host");
}

TEST(Memory, ParseKindErrorNamesValueAndChoices) {
  auto r = parse_mem_kind("mcdram");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::invalid_argument);
  const std::string& m = r.status().message();
  EXPECT_NE(m.find("'mcdram'"), std::string::npos) << m;
  EXPECT_NE(m.find("hbw-preferred"), std::string::npos) << m;
  EXPECT_EQ(m.find('\n'), std::string::npos);
}

TEST(Memory, DramAllocatesAligned) {
  auto b = Buffer::allocate(1000, MemKind::dram);
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  EXPECT_EQ(b->kind(), MemKind::dram);
  EXPECT_EQ(b->bytes(), 1000u);
  EXPECT_TRUE(aligned64(b->data()));
  touch(*b);
}

// A borrowed buffer is the caller's memory: read in place, carried by a move, never freed (a
// free of the vector's memory here would crash or be reported under the sanitizers).
TEST(Memory, BorrowedMemoryIsReadInPlaceAndNotFreed) {
  std::vector<uint8_t> mine(100, 7);
  {
    Buffer b = Buffer::borrow(mine.data(), mine.size());
    EXPECT_TRUE(b.borrowed());
    EXPECT_EQ(b.kind(), MemKind::dram);
    Buffer moved = std::move(b);
    EXPECT_EQ(moved.as<uint8_t>(), mine.data());
    EXPECT_EQ(moved.bytes(), 100u);
    EXPECT_TRUE(moved.borrowed());
    EXPECT_FALSE(b.borrowed());  // NOLINT(bugprone-use-after-move): a moved-from Buffer is empty
    moved = std::move(Buffer::allocate(8, MemKind::dram)).value();  // releases the borrow
    EXPECT_FALSE(moved.borrowed());
  }
  mine[99] = 9;  // still the vector's
  EXPECT_EQ(mine[0], 7);
}

TEST(Memory, HbwWorksWhenNodesNamed) {
  // The test environment sets MEMKIND_HBW_NODES=0, so node 0 counts as high-bandwidth.
  const char* nodes = std::getenv("MEMKIND_HBW_NODES");
  auto b = Buffer::allocate(1 << 20, MemKind::hbw);
  if (EASEL_HAVE_MEMKIND && nodes != nullptr && std::string(nodes) == "0") {
    EXPECT_TRUE(hbw_available());
    ASSERT_TRUE(b.ok()) << b.status().to_string();
    EXPECT_EQ(b->kind(), MemKind::hbw);
    EXPECT_TRUE(aligned64(b->data()));
    touch(*b);
  } else if (!hbw_available()) {
    ASSERT_FALSE(b.ok());
    EXPECT_EQ(b.status().code(), Code::unavailable);
    EXPECT_NE(b.status().message().find("high-bandwidth"), std::string::npos);
  }
}

TEST(Memory, HbwPreferredAlwaysSucceeds) {
  auto b = Buffer::allocate(4096, MemKind::hbw_preferred);
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  EXPECT_EQ(b->kind(), hbw_available() ? MemKind::hbw_preferred : MemKind::dram);
  touch(*b);
}

TEST(Memory, InterleaveSucceeds) {
  auto b = Buffer::allocate(3 << 20, MemKind::interleave);
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  EXPECT_EQ(b->kind(), EASEL_HAVE_MEMKIND ? MemKind::interleave : MemKind::dram);
  EXPECT_TRUE(aligned64(b->data()));
  touch(*b);
}

TEST(Memory, DeviceKindsRefusedOnHost) {
  for (MemKind k : {MemKind::pinned_host, MemKind::device}) {
    auto b = Buffer::allocate(64, k);
    ASSERT_FALSE(b.ok());
    EXPECT_EQ(b.status().code(), Code::unavailable);
    EXPECT_NE(b.status().message().find("CUDA"), std::string::npos) << b.status().message();
  }
}

TEST(Memory, ZeroSizeWorks) {
  for (MemKind k : {MemKind::dram, MemKind::hbw_preferred, MemKind::interleave}) {
    auto b = Buffer::allocate(0, k);
    ASSERT_TRUE(b.ok()) << mem_kind_name(k);
    EXPECT_EQ(b->bytes(), 0u);
  }
}

TEST(Memory, HugeSizeIsAnErrorNotACrash) {
  for (MemKind k : {MemKind::dram, MemKind::hbw_preferred, MemKind::interleave}) {
    auto b = Buffer::allocate(size_t{1} << 60, k);
    ASSERT_FALSE(b.ok()) << mem_kind_name(k);
    EXPECT_EQ(b.status().code(), Code::unavailable);
    EXPECT_NE(b.status().message().find("MiB"), std::string::npos) << b.status().message();
  }
  auto b = Buffer::allocate(~size_t{0}, MemKind::dram);  // would overflow any size arithmetic
  EXPECT_FALSE(b.ok());
}

TEST(Memory, BufferMovesOwnership) {
  auto r = Buffer::allocate(256, MemKind::dram);
  ASSERT_TRUE(r.ok());
  Buffer a = std::move(r).value();
  void* p = a.data();
  Buffer b = std::move(a);
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(a.data(), nullptr);  // NOLINT: checking the moved-from state
  EXPECT_EQ(a.bytes(), 0u);
  Buffer c;
  c = std::move(b);
  EXPECT_EQ(c.data(), p);
  EXPECT_EQ(c.bytes(), 256u);
}

// A thread bound to nodes (a worker group on a machine of several nodes) gets its dram, hbw and
// hbw-preferred buffers bound there explicitly; interleave and unbound threads are as before.
// This machine's node 0 stands for both.
TEST(Memory, BoundThreadPlacesOnItsNodes) {
  ASSERT_EQ(thread_node_binding().dram_node, -1);
  set_thread_node_binding(NodeBinding{0, 0});
  for (MemKind k : {MemKind::dram, MemKind::hbw, MemKind::hbw_preferred}) {
    auto b = Buffer::allocate(3 << 20, k);
    ASSERT_TRUE(b.ok()) << mem_kind_name(k) << ": " << b.status().to_string();
    EXPECT_EQ(b->kind(), k);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b->data()) % 64, 0u);
    std::memset(b->data(), 1, b->bytes());  // first touch: the pages land now
    if (b->node() < 0) continue;            // mbind refused here (logged): nothing more to see
    EXPECT_EQ(b->node(), 0);
    const int at = node_of_address(b->as<char>() + b->bytes() - 1);
    EXPECT_TRUE(at == 0 || at == -1) << at;  // -1: the kernel does not say
    Buffer moved = std::move(b).value();
    EXPECT_EQ(moved.node(), 0);
  }
  auto i = Buffer::allocate(1 << 20, MemKind::interleave);
  ASSERT_TRUE(i.ok());
  EXPECT_EQ(i->node(), -1);
  set_thread_node_binding(NodeBinding{});
  auto d = Buffer::allocate(1 << 20, MemKind::dram);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->node(), -1);
}

TEST(Placement, DefaultsToDram) {
  Placement p;
  for (MemKind k : p.kind)
    EXPECT_EQ(k, MemKind::dram);
  EXPECT_EQ(placement_to_string(p), "all=dram");
}

TEST(Placement, PlainKindSetsAll) {
  auto p = parse_placement("hbw");
  ASSERT_TRUE(p.ok());
  for (MemKind k : p->kind)
    EXPECT_EQ(k, MemKind::hbw);
}

TEST(Placement, AllThenOverrides) {
  auto p = parse_placement("weights=hbw,all=hbw-preferred, dataset=dram");
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ((*p)[BufferClass::weights], MemKind::hbw);
  EXPECT_EQ((*p)[BufferClass::dataset], MemKind::dram);
  EXPECT_EQ((*p)[BufferClass::centre], MemKind::hbw_preferred);
  EXPECT_EQ((*p)[BufferClass::activations], MemKind::hbw_preferred);
  // The string form parses back to the same placement.
  auto back = parse_placement(placement_to_string(*p));
  ASSERT_TRUE(back.ok());
  for (int i = 0; i < kBufferClassCount; ++i)
    EXPECT_EQ(back->kind[i], p->kind[i]);
}

TEST(Placement, ErrorsNameTheBadPart) {
  auto r = parse_placement("weights=hbm");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'hbm'"), std::string::npos) << r.status().message();
  r = parse_placement("gradients=hbw");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'gradients'"), std::string::npos);
  EXPECT_NE(r.status().message().find("grads"), std::string::npos);
  r = parse_placement("weights=hbw,,dataset=dram");
  EXPECT_FALSE(r.ok());
  r = parse_placement("weights=hbw,weights=dram");
  EXPECT_FALSE(r.ok());
}

TEST(Placement, ClassNames) {
  EXPECT_STREQ(buffer_class_name(BufferClass::centre), "centre");
  EXPECT_STREQ(buffer_class_name(BufferClass::dataset), "dataset");
}

TEST(Arena, LayoutAlignsSegments) {
  ArenaLayout layout;
  Segment a;
  a.name = "conv1.weights";
  a.dims = {20, 1, 5, 5};
  Segment b;
  b.name = "conv1.bias";
  b.dims = {20};
  Segment c;
  c.name = "ip.bias";
  c.dims = {10};
  EXPECT_EQ(layout.add(a), 0);
  EXPECT_EQ(layout.add(b), 1);
  EXPECT_EQ(layout.add(c), 2);
  EXPECT_EQ(layout.segment(0).offset, 0);
  EXPECT_EQ(layout.segment(0).count, 500);
  EXPECT_EQ(layout.segment(1).offset, 512);
  EXPECT_EQ(layout.segment(2).offset, 544);
  EXPECT_EQ(layout.total_floats(), 560);
  EXPECT_EQ(layout.param_count(), 530);
  for (const Segment& s : layout.segments())
    EXPECT_EQ(s.offset % kArenaAlign, 0);
}

TEST(Arena, CreateIsZeroFilled) {
  auto a = Arena::create(1000, MemKind::dram);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->size(), 1000);
  EXPECT_TRUE(aligned64(a->data()));
  for (float x : a->span())
    ASSERT_EQ(x, 0.f);
  auto e = Arena::create(0, MemKind::dram);
  EXPECT_TRUE(e.ok());
  EXPECT_FALSE(Arena::create(-1, MemKind::dram).ok());
}

}  // namespace
}  // namespace easel
