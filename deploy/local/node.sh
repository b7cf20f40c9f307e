#!/usr/bin/env bash
# deploy/local/node.sh — the real node of `cluster.sh up --node`: containerd + runc, a CNI
# bridge, kubelet, kube-proxy, kube-scheduler and kube-controller-manager beside cluster.sh's
# etcd and kube-apiserver, and the controller running in it as the Deployment from deploy/.
# Sourced by cluster.sh (uses its globals and helpers), not run.
#
# Modelled on upstream's hack/local-up-cluster.sh (same source tree), with what this kind of
# machine needs (shared/notes/real-node.md has the story):
# - no CAP_SYS_RESOURCE: nothing may lower oom_score_adj, so containerd runs with
#   restrict_oom_score_adj (else every sandbox fails: "nsexec: failed to update
#   /proc/self/oom_score_adj");
# - kube-apiserver needs a non-loopback address for the `kubernetes` Service endpoints and
#   the kernel has no dummy device: the CNI bridge is created first with the node address,
#   which is also the kubelet's address and the bridge plugin's gateway;
# - cgroupfs everywhere, swap allowed, no eviction thresholds, no image GC (the images are
#   imported; nothing can be pulled back);
# - everything the node writes lives under $CLUSTER_DIR/node, except what the programs
#   hard-code (/var/log/pods, /var/log/containers, /run/netns, /var/lib/cni, /run/containerd/s,
#   the kubepods cgroups, iptables chains, a few sysctls). `up` records which of those
#   existed and the sysctls' values before it changes anything; `down` (node_teardown) puts
#   them back.
#
# One real node per machine: the bridge name, its subnet and the node name are fixed.

readonly NODE_NAME=tec-node
readonly NODE_BRIDGE=tec0
readonly NODE_SUBNET=10.244.0.0/24
readonly NODE_IP=10.244.0.1
readonly NODE_PREFIX=24
readonly CNI_BIN_DIR=/usr/lib/cni
readonly CONTROLLER_NS=taint-eviction-controller
readonly CONTROLLER_DEPLOYMENT=taint-eviction-controller
readonly CONTROLLER_IMAGE_REPO=localhost/taint-eviction-controller
readonly PAUSE_IMAGE=localhost/tec-pause:3.4
readonly WORKLOAD_IMAGE=localhost/tec-workload:1
readonly NODE_DAEMONS="containerd kube-controller-manager kube-scheduler kubelet kube-proxy"
# Sysctls the kubelet (kernel tunables), kube-proxy (route_localnet, conntrack) and the bridge
# plugin (ip_forward) may change: saved by `up`, restored by `down`.
readonly NODE_SYSCTLS="net.ipv4.ip_forward net.ipv4.conf.all.route_localnet
  net.bridge.bridge-nf-call-iptables net.bridge.bridge-nf-call-ip6tables
  vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
  kernel.keys.root_maxkeys kernel.keys.root_maxbytes net.netfilter.nf_conntrack_max
  net.netfilter.nf_conntrack_tcp_timeout_established
  net.netfilter.nf_conntrack_tcp_timeout_close_wait"
# Host paths the node's programs create on their own: removed by `down` when `up` found them
# absent.
readonly NODE_HOST_PATHS="/var/log/pods /var/log/containers /run/netns /var/run/netns
  /var/lib/cni /run/containerd /opt/containerd /var/lib/kubelet
  /usr/libexec/kubernetes /etc/kubernetes"

NODE_DIR="$CLUSTER_DIR/node"
HOST_STATE="$NODE_DIR/host"
CONTAINERD_SOCK="$NODE_DIR/run/containerd.sock"
OVERLAY_DIR="$REPO_ROOT/deploy/local/node-overlay"

node_kubectl() { timeout 120 kubectl --kubeconfig "$KUBECONFIG_PATH" --request-timeout=30s "$@"; }
node_ctr() { ctr --address "$CONTAINERD_SOCK" "$@"; }

node_mode_recorded() { [ "$(read_state TEC_CLUSTER_MODE)" = node ]; }

# ---------------------------------------------------------------------------------------------
# Preflight
# ---------------------------------------------------------------------------------------------

node_preflight() {
  is_root || die "--node needs root (containerd, mounts, a bridge, iptables, cgroups)"
  need_cmd containerd containerd
  need_cmd ctr containerd
  need_cmd runc runc
  need_cmd iptables iptables
  need_cmd conntrack conntrack
  need_cmd nft nftables
  need_cmd ip iproute2
  need_cmd kubectl kubernetes-client
  need_cmd buildah buildah
  need_cmd debootstrap debootstrap
  need_cmd busybox busybox-static
  [ -x "$CNI_BIN_DIR/bridge" ] && [ -x "$CNI_BIN_DIR/host-local" ] && [ -x "$CNI_BIN_DIR/loopback" ] \
    || { apt_update_once; DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
           containernetworking-plugins >&2 || die "apt-get install containernetworking-plugins failed"; }
  [ -x "$CNI_BIN_DIR/bridge" ] || die "no CNI bridge plugin in $CNI_BIN_DIR"
  grep -qw overlay /proc/filesystems || die "the kernel has no overlay filesystem (containerd's snapshotter needs it)"
  [ -d /sys/fs/cgroup/cpu ] && [ -d /sys/fs/cgroup/memory ] \
    || die "cgroup v1 (cpu, memory) is not mounted under /sys/fs/cgroup: this script runs a 1.20 kubelet with cgroupfs on cgroup v1"
  # A unix socket path is limited to 108 bytes (containerd adds ".ttrpc").
  [ "${#CONTAINERD_SOCK}" -le 100 ] \
    || die "state directory path too long for containerd's socket ($CONTAINERD_SOCK): use a shorter TEC_CLUSTER_DIR"
  # One real node per machine: the bridge, the subnet and the kubepods cgroups are fixed.
  if [ ! -d "$HOST_STATE" ]; then
    node_reclaim_abandoned
    if ip link show "$NODE_BRIDGE" >/dev/null 2>&1; then
      local owner
      owner=$(node_bridge_owner)
      die "the bridge $NODE_BRIDGE exists but was not made for $CLUSTER_DIR: another real-node cluster runs on this machine (${owner:-its state directory is not recorded on the bridge}; 'cluster.sh down' in its state directory first)"
    fi
    if [ -d /sys/fs/cgroup/cpu/kubepods ]; then
      die "/sys/fs/cgroup/cpu/kubepods exists: another kubelet runs (or ran) on this machine"
    fi
  fi
}

# The bridge records the state directory of the cluster that made it, as its interface alias
# (so the record lives and dies with the bridge): "tec-cluster:DIR".
readonly NODE_BRIDGE_ALIAS_PREFIX=tec-cluster:

# node_bridge_owner: the state directory recorded on the bridge; empty if none.
node_bridge_owner() {
  local alias
  alias=$(cat "/sys/class/net/$NODE_BRIDGE/ifalias" 2>/dev/null) || return 0
  case "$alias" in
    "$NODE_BRIDGE_ALIAS_PREFIX"/*) echo "${alias#"$NODE_BRIDGE_ALIAS_PREFIX"}" ;;
  esac
}

# node_cluster_in_use DIR: a daemon started for the state directory DIR still runs, a
# containerd shim of its containerd does, or a cluster.sh up/down holds its lock.
node_cluster_in_use() (
  CLUSTER_DIR=$1
  CONTAINERD_SOCK="$CLUSTER_DIR/node/run/containerd.sock"
  local n fd
  for n in containerd kubelet kube-proxy kube-scheduler kube-controller-manager kube-apiserver etcd; do
    pid_of "$n" >/dev/null && exit 0
  done
  [ -z "$(node_shim_pids)" ] || exit 0
  if [ -f "$CLUSTER_DIR/.lock" ]; then
    exec {fd}<"$CLUSTER_DIR/.lock"
    flock -n "$fd" || exit 0
  fi
  exit 1
)

# node_reclaim_abandoned: a run that was killed (a CI job's timeout, a session's end) leaves
# its node behind: the bridge, mounts, iptables chains, cgroups, changed sysctls, while none of
# its processes runs. Every later 'up --node' would refuse to start beside it. When the bridge
# names a state directory that still exists and nothing of that cluster runs, that cluster is
# taken down with its own records ('cluster.sh down' in its state directory), and this 'up'
# goes on. A cluster with anything still running is left alone (node_preflight refuses).
node_reclaim_abandoned() {
  ip link show "$NODE_BRIDGE" >/dev/null 2>&1 || return 0
  local owner
  owner=$(node_bridge_owner)
  [ -n "$owner" ] && [ "$owner" != "$CLUSTER_DIR" ] || return 0
  [ -d "$owner/node/host" ] || return 0
  if node_cluster_in_use "$owner"; then
    return 0
  fi
  log "the bridge $NODE_BRIDGE belongs to a real-node cluster in $owner that nothing runs any more (a killed run?): taking it down first"
  TEC_CLUSTER_DIR=$owner "$SCRIPT_DIR/cluster.sh" down >&2 \
    || die "taking down the abandoned real-node cluster in $owner failed ('cluster.sh down' in that state directory)"
}

# ---------------------------------------------------------------------------------------------
# Images
# ---------------------------------------------------------------------------------------------

# node_images [BINARY]: builds (or finds cached) the images the node runs and sets
# CONTROLLER_IMAGE_SOURCE: the project's image from deploy/Dockerfile, or, with BINARY, the
# Dockerfile's runtime stage holding that binary.
node_images() {
  local bin=${1:-} images="$SCRIPT_DIR/images.sh"
  "$images" pause >&2 || die "building the pause image failed"
  "$images" workload >&2 || die "building the workload image failed"
  if [ -n "$bin" ]; then
    "$images" prebuilt "$bin" >&2 || die "building the controller image from $bin failed"
    CONTROLLER_IMAGE_SOURCE=$CONTROLLER_IMAGE_REPO:prebuilt
  else
    "$images" project >&2 || die "building deploy/Dockerfile failed"
    CONTROLLER_IMAGE_SOURCE=$CONTROLLER_IMAGE_REPO:latest
  fi
  local id
  id=$("$images" id "$CONTROLLER_IMAGE_SOURCE") || die "no image id for $CONTROLLER_IMAGE_SOURCE"
  # Tagged with its id, so a new build is a new image reference and rolls the Deployment.
  CONTROLLER_IMAGE="$CONTROLLER_IMAGE_REPO:${id:0:12}"
}

# node_import_images: the images into containerd's k8s.io namespace (the kubelet's).
node_import_images() {
  local images="$SCRIPT_DIR/images.sh" img archive
  for img in "$PAUSE_IMAGE" "$WORKLOAD_IMAGE" "$CONTROLLER_IMAGE_SOURCE"; do
    archive=$("$images" archive "$img") || die "cannot export $img"
    node_ctr -n k8s.io images import "$archive" >/dev/null \
      || die "ctr images import $archive failed"
  done
  node_ctr -n k8s.io images tag --force "$CONTROLLER_IMAGE_SOURCE" "$CONTROLLER_IMAGE" >/dev/null \
    || die "ctr images tag $CONTROLLER_IMAGE failed"
}

# ---------------------------------------------------------------------------------------------
# Host state: record before, restore after
# ---------------------------------------------------------------------------------------------

# iptables_chains: "FAMILY TABLE CHAIN" for every chain of iptables and ip6tables.
iptables_chains() {
  local fam save
  for fam in 4 6; do
    save=iptables-save
    [ "$fam" = 6 ] && save=ip6tables-save
    command -v "$save" >/dev/null 2>&1 || continue
    "$save" 2>/dev/null | awk -v f="$fam" '/^\*/ { t = substr($0, 2) } /^:/ { print f, t, substr($1, 2) }'
  done
}

node_record_host_state() {
  [ -f "$HOST_STATE/recorded" ] && return 0  # recorded by an earlier 'up' not yet torn down
  mkdir -p "$HOST_STATE"
  local s v p
  : >"$HOST_STATE/sysctl"
  for s in $NODE_SYSCTLS; do
    v=$(sysctl -n "$s" 2>/dev/null) && printf '%s=%s\n' "$s" "$v" >>"$HOST_STATE/sysctl"
  done
  : >"$HOST_STATE/absent-paths"
  for p in $NODE_HOST_PATHS; do
    [ -e "$p" ] || [ -L "$p" ] || echo "$p" >>"$HOST_STATE/absent-paths"
  done
  ls -1 /run/netns 2>/dev/null >"$HOST_STATE/netns" || : >"$HOST_STATE/netns"
  iptables_chains >"$HOST_STATE/iptables-chains"
  nft list tables 2>/dev/null >"$HOST_STATE/nft-tables" || : >"$HOST_STATE/nft-tables"
  touch "$HOST_STATE/recorded"
}

node_restore_sysctls() {
  [ -f "$HOST_STATE/sysctl" ] || return 0
  local line key val now
  while IFS= read -r line; do
    key=${line%%=*} val=${line#*=}
    now=$(sysctl -n "$key" 2>/dev/null) || continue
    [ "$now" = "$val" ] && continue
    log "restoring sysctl $key=$val (was $now)"
    sysctl -q -w "$key=$val" >/dev/null 2>&1 || log "warning: could not restore sysctl $key=$val"
  done <"$HOST_STATE/sysctl"
}

# Deletes the iptables/ip6tables chains named KUBE-* or CNI-* that did not exist before 'up',
# and the rules of other chains that jump to them.
node_remove_iptables_chains() {
  local before="$HOST_STATE/iptables-chains" fam table chain ipt save rule
  [ -f "$before" ] || return 0
  for fam in 4 6; do
    ipt=iptables save=iptables-save
    [ "$fam" = 6 ] && ipt=ip6tables save=ip6tables-save
    command -v "$save" >/dev/null 2>&1 || continue
    local ours=()
    while read -r _ table chain; do
      case "$chain" in KUBE-* | CNI-*) ;; *) continue ;; esac
      grep -qxF "$fam $table $chain" "$before" && continue
      ours+=("$table $chain")
    done < <(iptables_chains | awk -v f="$fam" '$1 == f')
    [ "${#ours[@]}" -gt 0 ] || continue
    # Rules anywhere that jump to one of our chains, deleted by their exact spec.
    local entry
    for entry in "${ours[@]}"; do
      table=${entry%% *} chain=${entry#* }
      while IFS= read -r rule; do
        # shellcheck disable=SC2086 # the rule spec is a word list as iptables-save prints it
        eval "$ipt -w -t $table -D ${rule#-A }" 2>/dev/null || true
      done < <("$save" -t "$table" 2>/dev/null | grep -E "^-A .* -j $chain( |\$)" || true)
    done
    for entry in "${ours[@]}"; do
      table=${entry%% *} chain=${entry#* }
      "$ipt" -w -t "$table" -F "$chain" 2>/dev/null || true
    done
    for entry in "${ours[@]}"; do
      table=${entry%% *} chain=${entry#* }
      "$ipt" -w -t "$table" -X "$chain" 2>/dev/null \
        || log "warning: could not delete $ipt chain $table/$chain"
    done
  done
}

# With iptables' nf_tables backend, the first rule in a table creates that table, and removing
# every rule leaves it behind, empty. Deletes the ip/ip6 tables that did not exist before 'up'
# and hold nothing but their base chains with an accept policy.
node_remove_nft_tables() {
  [ -f "$HOST_STATE/nft-tables" ] && command -v nft >/dev/null 2>&1 || return 0
  local fam name extra
  while read -r _ fam name; do
    case "$fam" in ip | ip6) ;; *) continue ;; esac
    grep -qxF "table $fam $name" "$HOST_STATE/nft-tables" && continue
    extra=$(nft list table "$fam" "$name" 2>/dev/null \
      | grep -Ev '^table |^[[:space:]]*(chain [A-Z]+ \{|type [a-z]+ hook [a-z]+ priority [a-z0-9-]+; policy accept;|\})?[[:space:]]*$' \
      || true)
    if [ -n "$extra" ]; then
      log "warning: nftables table $fam $name (created while the node ran) is not empty; left in place"
      continue
    fi
    nft delete table "$fam" "$name" 2>/dev/null || log "warning: cannot delete nftables table $fam $name"
  done < <(nft list tables 2>/dev/null)
}

# ---------------------------------------------------------------------------------------------
# PKI and configuration files
# ---------------------------------------------------------------------------------------------

# Tokens (tokens.csv) for the node's components: the identities the default RBAC and the Node
# authorizer know (system:kube-controller-manager, system:kube-scheduler, system:kube-proxy,
# system:node:<name> in system:nodes).
node_token() { awk -F, -v u="$1" '$2 == u { print $1; exit }' "$TOKEN_FILE"; }

node_gen_pki() {
  local user group old_umask
  old_umask=$(umask)
  umask 077
  for user in system:kube-controller-manager system:kube-scheduler system:kube-proxy \
              "system:node:$NODE_NAME"; do
    [ -n "$(node_token "$user")" ] && continue
    group=""
    [ "$user" = "system:node:$NODE_NAME" ] && group=',"system:nodes"'
    printf '%s,%s,%s%s\n' "$(openssl rand -hex 32)" "$user" "$user" "$group" >>"$TOKEN_FILE"
  done
  # kube-apiserver's client certificate towards the kubelet (logs, exec): system:masters.
  if [ ! -s "$PKI_DIR/apiserver-kubelet-client.crt" ] || [ ! -s "$PKI_DIR/apiserver-kubelet-client.key" ]; then
    log "generating kube-apiserver's kubelet client certificate"
    sign_cert apiserver-kubelet-client /O=system:masters/CN=kube-apiserver-kubelet-client \
      "basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth"
  fi
  umask "$old_umask"
}

# The runtime's configuration: containerd (its own socket, root, state, runc root and CNI
# directories under the state dir) and the CNI network. Needs no port.
node_write_runtime_config() {
  mkdir -p "$NODE_DIR/run" "$NODE_DIR/containerd" "$NODE_DIR/cni/net.d" "$NODE_DIR/cni/ipam" \
    "$NODE_DIR/runc"
  # restrict_oom_score_adj: see the top of this file.
  cat >"$NODE_DIR/containerd/config.toml" <<EOF
version = 2
root = "$NODE_DIR/containerd/root"
state = "$NODE_DIR/containerd/state"
disabled_plugins = ["io.containerd.internal.v1.tracing", "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs"]

[grpc]
  address = "$CONTAINERD_SOCK"

[plugins."io.containerd.internal.v1.opt"]
  path = "$NODE_DIR/containerd/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$NODE_DIR/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$CNI_BIN_DIR"
    conf_dir = "$NODE_DIR/cni/net.d"
    max_conf_num = 1
EOF

  # The pod network: one bridge (created by node_create_bridge with the node address), host-local
  # addresses kept under the state dir. No masquerading: pods talk only to this host.
  cat >"$NODE_DIR/cni/net.d/10-tec.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "tec-node",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$NODE_BRIDGE",
      "isGateway": true,
      "isDefaultGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{ "subnet": "$NODE_SUBNET", "gateway": "$NODE_IP" }]],
        "dataDir": "$NODE_DIR/cni/ipam"
      }
    }
  ]
}
EOF
}

node_write_configs() {
  local api_url=$1 kubelet_port=$2 kubelet_healthz_port=$3 proxy_healthz_port=$4 proxy_metrics_port=$5
  mkdir -p "$NODE_DIR/kubelet"
  write_kubeconfig_file "$NODE_DIR/kube-controller-manager.kubeconfig" "$api_url" "$PKI_DIR/ca.crt" \
    system:kube-controller-manager "$(node_token system:kube-controller-manager)"
  write_kubeconfig_file "$NODE_DIR/kube-scheduler.kubeconfig" "$api_url" "$PKI_DIR/ca.crt" \
    system:kube-scheduler "$(node_token system:kube-scheduler)"
  write_kubeconfig_file "$NODE_DIR/kube-proxy.kubeconfig" "$api_url" "$PKI_DIR/ca.crt" \
    system:kube-proxy "$(node_token system:kube-proxy)"
  write_kubeconfig_file "$NODE_DIR/kubelet.kubeconfig" "$api_url" "$PKI_DIR/ca.crt" \
    "system:node:$NODE_NAME" "$(node_token "system:node:$NODE_NAME")"

  # The kubelet: cgroupfs, swap allowed, no eviction thresholds, no image GC, authenticated
  # and authorized API (x509 from our CA, webhook for tokens).
  cat >"$NODE_DIR/kubelet-config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
port: $kubelet_port
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $kubelet_healthz_port
cgroupDriver: cgroupfs
failSwapOn: false
evictionHard: {}
evictionSoft: {}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: $PKI_DIR/ca.crt
authorization:
  mode: Webhook
EOF

  # kube-proxy: iptables mode; conntrack sysctls left alone (0 = do not set).
  cat >"$NODE_DIR/kube-proxy-config.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: $NODE_DIR/kube-proxy.kubeconfig
hostnameOverride: $NODE_NAME
bindAddress: $NODE_IP
clusterCIDR: $NODE_SUBNET
mode: iptables
healthzBindAddress: 127.0.0.1:$proxy_healthz_port
metricsBindAddress: 127.0.0.1:$proxy_metrics_port
oomScoreAdj: 0
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
EOF
}

node_create_bridge() {
  if ! ip link show "$NODE_BRIDGE" >/dev/null 2>&1; then
    log "creating the pod bridge $NODE_BRIDGE with $NODE_IP/$NODE_PREFIX (the node address)"
    ip link add "$NODE_BRIDGE" type bridge || die "ip link add $NODE_BRIDGE type bridge failed"
  fi
  ip link set dev "$NODE_BRIDGE" alias "$NODE_BRIDGE_ALIAS_PREFIX$CLUSTER_DIR" \
    || die "cannot record the state directory on $NODE_BRIDGE (ip link set alias)"
  ip addr show dev "$NODE_BRIDGE" | grep -q "inet $NODE_IP/$NODE_PREFIX " \
    || ip addr add "$NODE_IP/$NODE_PREFIX" dev "$NODE_BRIDGE" || die "cannot give $NODE_BRIDGE the address $NODE_IP"
  ip link set "$NODE_BRIDGE" up || die "cannot bring $NODE_BRIDGE up"
}

# ---------------------------------------------------------------------------------------------
# Starting
# ---------------------------------------------------------------------------------------------

# node_wait WHAT SECONDS CMD...: until CMD succeeds; dies with the log tails after SECONDS.
node_wait() {
  local what=$1 secs=$2 deadline
  shift 2
  deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      node_print_log_tails
      die "$what not within ${secs}s"
    fi
    sleep 0.5
  done
}

node_print_log_tails() {
  local n f
  for n in $NODE_DAEMONS; do
    f="$CLUSTER_DIR/$n.log"
    [ -f "$f" ] || continue
    printf '\n----- last lines of %s -----\n' "$f" >&2
    tail -n 15 "$f" >&2
  done
}

node_alive() {
  local n
  for n in $NODE_DAEMONS; do
    pid_of "$n" >/dev/null || { log "$n is not running"; return 1; }
  done
}

node_is_ready() {
  [ "$(node_kubectl get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}

# node_start API_URL: containerd, the images, then the Kubernetes components; waits for the
# node to be Ready.
node_start() {
  local api_url=$1 port_fd kubelet_port kubelet_healthz_port proxy_healthz_port proxy_metrics_port
  local kcm_port sched_port avoid
  node_write_runtime_config
  log "starting containerd (socket $CONTAINERD_SOCK)"
  start_daemon containerd containerd --config "$NODE_DIR/containerd/config.toml" --log-level warn
  node_wait "containerd answering on $CONTAINERD_SOCK" 60 node_ctr version
  node_import_images

  exec {port_fd}>"$CACHE_ROOT/.ports.lock"
  # Held while a control plane binds its ports (up to a minute each on a busy machine), so
  # several clusters starting at once (the e2e lanes, the real node) queue here: wait long.
  flock -w 900 "$port_fd" || die "timed out waiting for $CACHE_ROOT/.ports.lock"
  avoid="$(read_state TEC_CLUSTER_ETCD_PORT) $(read_state TEC_CLUSTER_ETCD_PEER_PORT) $(read_state TEC_CLUSTER_APISERVER_PORT)"
  kubelet_port=$(choose_port "" "$(read_state TEC_CLUSTER_KUBELET_PORT)" "$avoid" kubelet); avoid+=" $kubelet_port"
  kubelet_healthz_port=$(choose_port "" "$(read_state TEC_CLUSTER_KUBELET_HEALTHZ_PORT)" "$avoid" "kubelet healthz"); avoid+=" $kubelet_healthz_port"
  proxy_healthz_port=$(choose_port "" "$(read_state TEC_CLUSTER_PROXY_HEALTHZ_PORT)" "$avoid" "kube-proxy healthz"); avoid+=" $proxy_healthz_port"
  proxy_metrics_port=$(choose_port "" "$(read_state TEC_CLUSTER_PROXY_METRICS_PORT)" "$avoid" "kube-proxy metrics"); avoid+=" $proxy_metrics_port"
  kcm_port=$(choose_port "" "$(read_state TEC_CLUSTER_KCM_PORT)" "$avoid" kube-controller-manager); avoid+=" $kcm_port"
  sched_port=$(choose_port "" "$(read_state TEC_CLUSTER_SCHEDULER_PORT)" "$avoid" kube-scheduler)
  NODE_PORTS="$kubelet_port $kubelet_healthz_port $proxy_healthz_port $proxy_metrics_port $kcm_port $sched_port"

  node_write_configs "$api_url" "$kubelet_port" "$kubelet_healthz_port" "$proxy_healthz_port" "$proxy_metrics_port"

  # TEC_NODE_KCM_TAINT_MANAGER=1: the built-in taint manager on (make conformance-kcm runs
  # upstream's taint e2e against it, the controller scaled to 0).
  local kcm_taint_manager=false
  [ "${TEC_NODE_KCM_TAINT_MANAGER:-0}" = 1 ] && kcm_taint_manager=true
  log "starting kube-controller-manager $K8S_VERSION (built-in taint manager $([ "$kcm_taint_manager" = true ] && echo on || echo off))"
  start_daemon kube-controller-manager "$BIN_DIR/kube-controller-manager" \
    --kubeconfig="$NODE_DIR/kube-controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port="$kcm_port" --port=0 \
    --controllers='*' \
    --enable-taint-manager="$kcm_taint_manager" \
    --service-account-private-key-file="$PKI_DIR/sa.key" \
    --root-ca-file="$PKI_DIR/ca.crt" \
    --use-service-account-credentials=true \
    --service-cluster-ip-range="$SERVICE_CLUSTER_IP_RANGE" \
    --cluster-name=tec-local \
    --flex-volume-plugin-dir="$NODE_DIR/kube-controller-manager/volume-plugins" \
    --leader-elect=false \
    --profiling=false \
    --logtostderr=true --v=1

  log "starting kube-scheduler $K8S_VERSION"
  start_daemon kube-scheduler "$BIN_DIR/kube-scheduler" \
    --kubeconfig="$NODE_DIR/kube-scheduler.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port="$sched_port" --port=0 \
    --leader-elect=false \
    --profiling=false \
    --logtostderr=true --v=1

  # A Node object left from an earlier run (etcd's data is kept) would report its old Ready
  # condition until this kubelet posts its own: start from none.
  node_kubectl delete node "$NODE_NAME" --ignore-not-found >/dev/null 2>&1 || true
  log "starting kubelet $K8S_VERSION (node $NODE_NAME, $NODE_IP:$kubelet_port, root $NODE_DIR/kubelet)"
  start_daemon kubelet "$BIN_DIR/kubelet" \
    --config="$NODE_DIR/kubelet-config.yaml" \
    --kubeconfig="$NODE_DIR/kubelet.kubeconfig" \
    --root-dir="$NODE_DIR/kubelet" \
    --cert-dir="$NODE_DIR/kubelet/pki" \
    --volume-plugin-dir="$NODE_DIR/kubelet/volume-plugins" \
    --hostname-override="$NODE_NAME" \
    --node-ip="$NODE_IP" \
    --container-runtime=remote \
    --container-runtime-endpoint="unix://$CONTAINERD_SOCK" \
    --runtime-request-timeout=5m \
    --pod-infra-container-image="$PAUSE_IMAGE" \
    --logtostderr=true --v="${TEC_KUBELET_VERBOSITY:-1}"

  log "starting kube-proxy $K8S_VERSION (iptables mode)"
  start_daemon kube-proxy "$BIN_DIR/kube-proxy" \
    --config="$NODE_DIR/kube-proxy-config.yaml" \
    --logtostderr=true --v=1
  exec {port_fd}>&-

  log "waiting up to ${READY_TIMEOUT}s for node $NODE_NAME to be Ready"
  local deadline=$((SECONDS + READY_TIMEOUT))
  until node_is_ready; do
    node_alive || { node_print_log_tails; die "a node component exited during startup"; }
    if [ "$SECONDS" -ge "$deadline" ]; then
      node_print_log_tails
      die "node $NODE_NAME not Ready within ${READY_TIMEOUT}s"
    fi
    sleep 1
  done
}

# node_deploy: the controller as the Deployment from deploy/ with the node-overlay component
# and the image tag of this build; waits until both replicas are available.
node_deploy() {
  mkdir -p "$NODE_DIR/deploy"
  local base component flowcontrol
  base=$(realpath --relative-to="$NODE_DIR/deploy" "$REPO_ROOT/deploy")
  component=$(realpath --relative-to="$NODE_DIR/deploy" "$OVERLAY_DIR")
  flowcontrol=$(realpath --relative-to="$NODE_DIR/deploy" "$REPO_ROOT/deploy/components/flowcontrol-v1beta1")
  cat >"$NODE_DIR/deploy/kustomization.yaml" <<EOF
# Written by deploy/local/cluster.sh up --node: deploy/ with deploy/local/node-overlay, the
# FlowSchemas as Kubernetes 1.20 serves them (v1beta1) and the image this run imported into
# the node's containerd.
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - $base
components:
  - $component
  - $flowcontrol
images:
  - name: $CONTROLLER_IMAGE_REPO
    newTag: ${CONTROLLER_IMAGE##*:}
EOF
  log "applying the controller (kubectl apply -k: deploy/ + deploy/local/node-overlay, image $CONTROLLER_IMAGE)"
  node_kubectl apply -k "$NODE_DIR/deploy" >&2 || die "kubectl apply -k failed"
  local start=$SECONDS
  if ! node_kubectl -n "$CONTROLLER_NS" rollout status "deployment/$CONTROLLER_DEPLOYMENT" \
      --timeout="${READY_TIMEOUT}s" >&2; then
    node_kubectl -n "$CONTROLLER_NS" get pods -o wide >&2 || true
    node_kubectl -n "$CONTROLLER_NS" describe pods 2>&1 | tail -n 40 >&2 || true
    # The pods' logs go with the node on teardown: keep them in the state dir.
    local p
    for p in $(node_kubectl -n "$CONTROLLER_NS" get pods -o name 2>/dev/null); do
      node_kubectl -n "$CONTROLLER_NS" logs "$p" >"$CLUSTER_DIR/controller-${p#pod/}.log" 2>&1 || true
      printf '\n----- last lines of %s (also in %s) -----\n' "$p" "$CLUSTER_DIR/controller-${p#pod/}.log" >&2
      tail -n 15 "$CLUSTER_DIR/controller-${p#pod/}.log" >&2
    done
    die "the controller Deployment did not become available within ${READY_TIMEOUT}s"
  fi
  log "controller Deployment available after $((SECONDS - start)) s"
}

node_env_lines() {
  local p
  read -r -a p <<<"$NODE_PORTS"
  cat <<EOF
export TEC_CLUSTER_NODE_NAME='$NODE_NAME'
export TEC_CLUSTER_KCM_TAINT_MANAGER='${TEC_NODE_KCM_TAINT_MANAGER:-0}'
export TEC_CLUSTER_NODE_IP='$NODE_IP'
export TEC_CLUSTER_CONTAINERD_SOCK='$CONTAINERD_SOCK'
export TEC_CLUSTER_CONTROLLER_IMAGE='$CONTROLLER_IMAGE'
export TEC_CLUSTER_WORKLOAD_IMAGE='$WORKLOAD_IMAGE'
export TEC_CLUSTER_PAUSE_IMAGE='$PAUSE_IMAGE'
export TEC_CLUSTER_KUBELET_PORT='${p[0]}'
export TEC_CLUSTER_KUBELET_HEALTHZ_PORT='${p[1]}'
export TEC_CLUSTER_PROXY_HEALTHZ_PORT='${p[2]}'
export TEC_CLUSTER_PROXY_METRICS_PORT='${p[3]}'
export TEC_CLUSTER_KCM_PORT='${p[4]}'
export TEC_CLUSTER_SCHEDULER_PORT='${p[5]}'
EOF
}

# ---------------------------------------------------------------------------------------------
# Stopping: node_teardown leaves the machine as 'up' found it
# ---------------------------------------------------------------------------------------------

# Pods go through the kubelet while it still runs, so their containers stop, their sandboxes
# stop (CNI DEL) and their volumes are unmounted the normal way. kube-controller-manager and
# the scheduler stop first, so nothing is re-created meanwhile. Once nothing runs any more the
# pod objects are removed by force: a 1.20 kubelet removes a stopped pod's object only after
# its container GC (once a minute) has removed the sandbox.
node_drain_pods() {
  pid_of kubelet >/dev/null && pid_of kube-apiserver >/dev/null || return 0
  [ -s "$KUBECONFIG_PATH" ] || return 0
  log "deleting every pod on $NODE_NAME through the kubelet"
  local start=$SECONDS deadline=$((SECONDS + 90)) running
  local sel=(--all-namespaces --field-selector "spec.nodeName=$NODE_NAME")
  node_kubectl delete pods "${sel[@]}" --grace-period=2 --wait=false >/dev/null 2>&1 || true
  while :; do
    running=$(node_ctr -n k8s.io tasks ls 2>/dev/null | awk '$3 == "RUNNING"' | wc -l) || running=1
    [ "$running" -eq 0 ] && break
    if [ "$SECONDS" -ge "$deadline" ]; then
      log "warning: $running container(s) still running after 90 s; killing them directly"
      break
    fi
    sleep 0.5
  done
  node_kubectl delete pods "${sel[@]}" --grace-period=0 --force --wait=false >/dev/null 2>&1 || true
  node_kubectl delete node "$NODE_NAME" --ignore-not-found >/dev/null 2>&1 || true
  log "pods stopped in $((SECONDS - start)) s"
}

# Kills every task containerd still has, then every containerd-shim naming our socket.
node_kill_containers() {
  local id pid
  if pid_of containerd >/dev/null; then
    for id in $(node_ctr -n k8s.io tasks ls -q 2>/dev/null); do
      node_ctr -n k8s.io tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true
    done
    for id in $(node_ctr -n k8s.io tasks ls -q 2>/dev/null); do
      node_ctr -n k8s.io tasks delete -f "$id" >/dev/null 2>&1 || true
    done
  fi
  for pid in $(node_shim_pids); do
    log "killing containerd-shim pid $pid"
    kill -KILL "$pid" 2>/dev/null || true
  done
  # Anything left in the pods' cgroups.
  local procs
  while IFS= read -r procs; do
    while read -r pid; do
      [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null || true
    done <"$procs"
  done < <(find /sys/fs/cgroup/pids/kubepods /sys/fs/cgroup/memory/kubepods -name cgroup.procs 2>/dev/null)
}

# The pids of containerd shims started for this state dir's containerd (their command line
# names our socket).
node_shim_pids() {
  local d cmd
  for d in /proc/[0-9]*; do
    [ -r "$d/cmdline" ] || continue
    cmd=$({ tr '\0' ' ' <"$d/cmdline"; } 2>/dev/null) || continue
    case "$cmd" in
      *containerd-shim*"$CONTAINERD_SOCK"*) echo "${d#/proc/}" ;;
    esac
  done
}

# Unmounts everything mounted under the state dir, deepest first, and the network namespaces
# that appeared under /run/netns since 'up'.
node_unmount_all() {
  local m
  while IFS= read -r m; do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "warning: cannot unmount $m"
  done < <(awk -v d="$CLUSTER_DIR/" '{ p = $5; gsub(/\\040/, " ", p); if (index(p "/", d) == 1) print p }' /proc/self/mountinfo \
    | awk '{ print length($0) " " $0 }' | sort -rn | cut -d' ' -f2-)
  local ns
  for ns in /run/netns/cni-*; do
    [ -e "$ns" ] || continue
    grep -qxF "${ns##*/}" "$HOST_STATE/netns" 2>/dev/null && continue
    umount "$ns" 2>/dev/null || umount -l "$ns" 2>/dev/null || true
    rm -f "$ns"
  done
}

node_remove_cgroups() {
  local top
  for top in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/unified/kubepods; do
    [ -d "$top" ] || continue
    # Deepest first; rmdir only (a cgroup directory holds no regular files to delete).
    find "$top" -depth -type d -exec rmdir {} \; 2>/dev/null || true
    [ -d "$top" ] && log "warning: cannot remove cgroup $top (processes left in it?)"
  done
}

node_remove_host_paths() {
  [ -f "$HOST_STATE/absent-paths" ] || return 0
  local p
  while IFS= read -r p; do
    [ -n "$p" ] || continue
    if [ -e "$p" ] || [ -L "$p" ]; then
      if grep -q " ${p}[/ ]" /proc/self/mountinfo; then
        log "warning: $p still has mounts under it; left in place"
        continue
      fi
      log "removing $p (created by the node)"
      rm -rf "$p"
    fi
  done <"$HOST_STATE/absent-paths"
}

# node_teardown: stops the node's processes and puts the machine back as 'up' found it. Safe to
# run again, and on a half-started node.
node_teardown() {
  [ -d "$NODE_DIR" ] || return 0
  stop_daemon kube-controller-manager
  stop_daemon kube-scheduler
  node_drain_pods
  stop_daemon kube-proxy
  if [ -x "$BIN_DIR/kube-proxy" ] && [ -f "$HOST_STATE/recorded" ]; then
    "$BIN_DIR/kube-proxy" --cleanup --logtostderr=true --v=0 >"$CLUSTER_DIR/kube-proxy-cleanup.log" 2>&1 || true
  fi
  stop_daemon kubelet
  node_kill_containers
  stop_daemon containerd
  node_unmount_all
  if ip link show "$NODE_BRIDGE" >/dev/null 2>&1; then
    log "deleting the bridge $NODE_BRIDGE"
    ip link delete "$NODE_BRIDGE" || log "warning: cannot delete the bridge $NODE_BRIDGE"
  fi
  node_remove_iptables_chains
  node_remove_nft_tables
  node_remove_cgroups
  node_restore_sysctls
  node_remove_host_paths
  # The runtime state goes; certificates, tokens and etcd's data stay (cluster.sh down --wipe
  # removes those).
  if grep -q " $NODE_DIR/" /proc/self/mountinfo; then
    log "warning: mounts left under $NODE_DIR; not removing it"
  else
    rm -rf "$NODE_DIR"
  fi
}

node_status_lines() {
  local n pid
  for n in containerd kube-controller-manager kube-scheduler kubelet kube-proxy; do
    if pid=$(pid_of "$n"); then
      printf '%-15s running, pid %s\n' "$n:" "$pid"
    else
      printf '%-15s not running\n' "$n:"
    fi
  done
}
