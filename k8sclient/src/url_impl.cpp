// Boost.URL's compiled part (Debian's Boost 1.81 ships no libboost_url): built once here, in
// the kube library, for the server URL parser (config.cpp) and request-target escaping
// (paths.cpp).
#include <boost/url/src.hpp>
