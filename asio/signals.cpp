#include "tec/asio/signals.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/error_code.hpp>

namespace tec::async {

boost::asio::awaitable<void> each_signal(boost::asio::signal_set& signals,
                                         std::function<void(int)> on_signal) {
  boost::system::error_code ec;
  while (!ec) {
    const auto [wait_ec, signo] =
        co_await signals.async_wait(boost::asio::as_tuple(boost::asio::use_awaitable));
    ec = wait_ec;
    if (!ec) {
      on_signal(signo);
    }
  }
}

}  // namespace tec::async
