// The one translation unit that holds the compiled bodies of Asio, Asio SSL and Beast.
#include <boost/asio/impl/src.hpp>
#include <boost/asio/ssl/impl/src.hpp>
#include <boost/beast/src.hpp>
