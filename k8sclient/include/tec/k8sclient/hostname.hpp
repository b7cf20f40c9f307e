#pragma once

#include <string>

namespace tec::k8sclient {

/// This machine's host name (the pod name in a cluster), or "unknown". Identifies the process
/// in events (reportingInstance) and in the leader lease (holderIdentity).
std::string local_hostname();

}  // namespace tec::k8sclient
