// The compiled bodies of Beast's test stream (BOOST_BEAST_SEPARATE_COMPILATION), which
// asio/asio_impl.cpp leaves out of the daemon: fake_http_server's in-memory connections. In
// <boost/beast/src.hpp>'s order.
#include <boost/beast/core/detail/config.hpp>

#include <boost/beast/_experimental/test/impl/error.ipp>
#include <boost/beast/_experimental/test/impl/fail_count.ipp>
#include <boost/beast/_experimental/test/impl/stream.ipp>

#include <boost/beast/_experimental/test/detail/stream_state.ipp>
