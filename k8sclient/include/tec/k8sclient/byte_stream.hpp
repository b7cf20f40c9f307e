#pragma once

// A connection's bytes through a virtual interface, for client_options::connector: the seam a
// test opens its in-memory connections through (tests/k8sclient/support). TCP and TLS
// connections do not go through it.

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/system/error_code.hpp>
#include <cstddef>
#include <vector>

namespace tec::k8sclient {

/// One end of a connected byte stream. Every member is called on the client's executor (the
/// one get_executor() returns); the handlers complete as Asio's socket operations do (never
/// inside the initiating call).
class byte_stream {
public:
  using handler = boost::asio::any_completion_handler<void(boost::system::error_code, std::size_t)>;

  byte_stream() = default;
  virtual ~byte_stream() = default;
  byte_stream(const byte_stream&) = delete;
  byte_stream& operator=(const byte_stream&) = delete;

  [[nodiscard]] virtual boost::asio::any_io_executor get_executor() = 0;
  /// Reads at least one byte into `buffer` (or fails: asio::error::eof when the peer closed).
  virtual void async_read_some(boost::asio::mutable_buffer buffer, handler done) = 0;
  /// Writes at least one byte of `buffers`, in order.
  virtual void async_write_some(std::vector<boost::asio::const_buffer> buffers, handler done) = 0;
  /// Ends the stream; the operations in flight complete with an error.
  virtual void close() = 0;
  /// True when bytes have arrived that nobody has read yet (an idle connection is then not
  /// reused).
  [[nodiscard]] virtual bool has_unread_bytes() = 0;
};

}  // namespace tec::k8sclient
