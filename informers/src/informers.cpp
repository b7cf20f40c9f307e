// The pod and node informers, compiled once here.

// GCC 12 reports a false -Wmismatched-new-delete on Asio's awaitable frame allocator (its
// operator new/delete pair is matched; GCC mixes up the inlined frames of the coroutines
// instantiated here). Only this diagnostic, only this file.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

#include "tec/informers/informers.hpp"

#include "tec/k8sclient/reflector_impl.hpp"

template class tec::k8sclient::reflector<tec::informers::pod_codec, tec::informers::pod_store>;
template class tec::k8sclient::reflector<tec::informers::node_codec, tec::informers::node_store>;
