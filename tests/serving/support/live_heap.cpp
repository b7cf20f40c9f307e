#include "serving/support/live_heap.hpp"

// TSan's runtime defines the global operator new and delete itself (a second definition does
// not link): there the heap is not counted and the tests that need it skip.
#if defined(__SANITIZE_THREAD__)
#define TEC_LIVE_HEAP_COUNTED 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TEC_LIVE_HEAP_COUNTED 0
#endif
#endif
#ifndef TEC_LIVE_HEAP_COUNTED
#define TEC_LIVE_HEAP_COUNTED 1
#endif

#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <new>

// The replacement global operator new and delete of ops_test: malloc and free, counted by
// malloc_usable_size (also right under ASan and TSan, whose allocators answer it).

namespace {

std::atomic<std::int64_t> live{0};

#if TEC_LIVE_HEAP_COUNTED
void* counted(void* p) {
  if (p == nullptr) {
    throw std::bad_alloc();
  }
  live.fetch_add(static_cast<std::int64_t>(malloc_usable_size(p)), std::memory_order_relaxed);
  return p;
}

void release(void* p) noexcept {
  if (p != nullptr) {
    live.fetch_sub(static_cast<std::int64_t>(malloc_usable_size(p)), std::memory_order_relaxed);
    std::free(p);  // NOLINT(cppcoreguidelines-no-malloc)
  }
}

void* allocate(std::size_t n) {
  return counted(std::malloc(std::max<std::size_t>(n, 1)));  // NOLINT(cppcoreguidelines-no-malloc)
}

void* allocate(std::size_t n, std::align_val_t al) {
  void* p = nullptr;
  const auto alignment = std::max(static_cast<std::size_t>(al), sizeof(void*));
  if (posix_memalign(&p, alignment, std::max<std::size_t>(n, 1)) != 0) {
    p = nullptr;
  }
  return counted(p);
}
#endif  // TEC_LIVE_HEAP_COUNTED

}  // namespace

namespace tec::serving::testing {

std::int64_t live_heap_bytes() noexcept {
  return live.load(std::memory_order_relaxed);
}

bool live_heap_counted() noexcept {
  return TEC_LIVE_HEAP_COUNTED != 0;
}

}  // namespace tec::serving::testing

// NOLINTBEGIN(misc-new-delete-overloads)
#if TEC_LIVE_HEAP_COUNTED
void* operator new(std::size_t n) {
  return allocate(n);
}
void* operator new[](std::size_t n) {
  return allocate(n);
}
void* operator new(std::size_t n, std::align_val_t al) {
  return allocate(n, al);
}
void* operator new[](std::size_t n, std::align_val_t al) {
  return allocate(n, al);
}
void* operator new(std::size_t n, const std::nothrow_t& /*tag*/) noexcept {
  try {
    return allocate(n);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t& /*tag*/) noexcept {
  try {
    return allocate(n);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void operator delete(void* p) noexcept {
  release(p);
}
void operator delete[](void* p) noexcept {
  release(p);
}
void operator delete(void* p, std::size_t /*n*/) noexcept {
  release(p);
}
void operator delete[](void* p, std::size_t /*n*/) noexcept {
  release(p);
}
void operator delete(void* p, std::align_val_t /*al*/) noexcept {
  release(p);
}
void operator delete[](void* p, std::align_val_t /*al*/) noexcept {
  release(p);
}
void operator delete(void* p, std::size_t /*n*/, std::align_val_t /*al*/) noexcept {
  release(p);
}
void operator delete[](void* p, std::size_t /*n*/, std::align_val_t /*al*/) noexcept {
  release(p);
}
void operator delete(void* p, const std::nothrow_t& /*tag*/) noexcept {
  release(p);
}
void operator delete[](void* p, const std::nothrow_t& /*tag*/) noexcept {
  release(p);
}
// NOLINTEND(misc-new-delete-overloads)
#endif  // TEC_LIVE_HEAP_COUNTED
