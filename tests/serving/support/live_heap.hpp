#pragma once

// Bytes the test process holds on the heap through operator new, for tests that bound the
// memory a server keeps (a count of live allocations, not RSS: deterministic, unaffected by
// what the allocator keeps cached or returns to the kernel). ops_test replaces the global
// operator new and delete to keep it (live_heap.cpp); every thread's allocations count.

#include <cstdint>

namespace tec::serving::testing {

/// Bytes allocated with operator new and not yet deleted (usable sizes), now.
[[nodiscard]] std::int64_t live_heap_bytes() noexcept;

/// False where the heap is not counted (under TSan, whose runtime owns operator new): a test
/// that needs live_heap_bytes() skips there.
[[nodiscard]] bool live_heap_counted() noexcept;

}  // namespace tec::serving::testing
