#!/usr/bin/env bash
# deploy/local/cluster.sh — a throw-away local Kubernetes control plane (etcd + kube-apiserver
# v1.20.2, no kubelet, no controller-manager) for developing and testing the
# taint-eviction-controller, or with `up --node` a cluster with a real node (node.sh). See
# `cluster.sh --help`.
#
# The Kubernetes components are built once from Debian's `kubernetes` source package (the way
# Debian's own debian/rules builds it: GOPATH mode, vendored dependencies, CGO_ENABLED=0) and
# cached under
# ${XDG_CACHE_HOME:-$HOME/.cache}/taint-eviction-controller/kubernetes-v1.20.2/bin/.
set -euo pipefail

readonly SERVICE_CLUSTER_IP_RANGE=10.0.0.0/24
readonly SERVICE_FIRST_IP=10.0.0.1
readonly SA_ISSUER=https://kubernetes.default.svc

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
REPO_ROOT=$(cd "$SCRIPT_DIR/../.." && pwd -P)
readonly SCRIPT_DIR REPO_ROOT
PROG=$(basename "$0")
readonly PROG
# shellcheck source=lib.sh
source "$SCRIPT_DIR/lib.sh"

CLUSTER_DIR="${TEC_CLUSTER_DIR:-$REPO_ROOT/.local/cluster}"
case "$CLUSTER_DIR" in
  /*) ;;
  *) CLUSTER_DIR="$PWD/$CLUSTER_DIR" ;;
esac
CLUSTER_DIR="${CLUSTER_DIR%/}"
PKI_DIR="$CLUSTER_DIR/pki"
ETCD_DATA_DIR="$CLUSTER_DIR/etcd-data"
KUBECONFIG_PATH="$CLUSTER_DIR/admin.kubeconfig"
ENV_FILE="$CLUSTER_DIR/env"
TOKEN_FILE="$PKI_DIR/tokens.csv"
MARKER_FILE="$CLUSTER_DIR/.tec-local-cluster"

READY_TIMEOUT="${TEC_READY_TIMEOUT:-120}"
STOP_TIMEOUT="${TEC_STOP_TIMEOUT:-10}"
ETCD_QUOTA_BYTES="${TEC_ETCD_QUOTA_BYTES:-$((2 * 1024 * 1024 * 1024))}"
# Go's soft memory limit for kube-apiserver only (GOMEMLIMIT syntax, e.g. 9GiB; empty: none).
APISERVER_GOMEMLIMIT="${TEC_APISERVER_GOMEMLIMIT:-}"
# Extra kube-apiserver flags, split on spaces (bench/compare.sh's apf scenario: scarce seats).
read -r -a APISERVER_EXTRA_ARGS <<<"${TEC_APISERVER_ARGS:-}"
# Where kube-apiserver listens: 127.0.0.1, or the node address with --node (see node.sh).
API_HOST=127.0.0.1
NODE_MODE=0

# shellcheck source=node.sh
source "$SCRIPT_DIR/node.sh"

usage() {
  cat <<EOF
Usage: $PROG COMMAND [ARGS]

A local Kubernetes $K8S_VERSION cluster for developing and testing taint-eviction-controller:
etcd + kube-apiserver on 127.0.0.1 (no kubelet, no kube-controller-manager), or with --node a
cluster with a real node running the controller as the Deployment from deploy/.

Commands:
  up                       Build kube-apiserver if not cached, start etcd and kube-apiserver
                           in the background, wait for /readyz, write admin.kubeconfig and
                           print 'export KUBECONFIG=...'. Idempotent.
  up --node [--controller-binary PATH]
                           (root) The same with a real node: kube-controller-manager (taint
                           manager off), kube-scheduler, containerd, kubelet, kube-proxy and a
                           CNI bridge ($NODE_BRIDGE, $NODE_IP/$NODE_PREFIX); builds what is not cached
                           (components, images), applies deploy/ with deploy/local/node-overlay
                           and waits until the node is Ready and the controller available. The
                           controller image is deploy/Dockerfile's, or PATH on its runtime
                           stage. One such cluster per machine; one a killed run left
                           behind (nothing of it runs, its state directory is still there) is
                           taken down first.
  down [--wipe]            Stop the processes 'up' started (by recorded pid); with a node, put
                           the machine back as 'up' found it (pods, mounts, bridge, iptables,
                           cgroups, sysctls, host directories). State (certs, etcd data, ports)
                           is kept unless --wipe.
  status                   Say whether the cluster is running. Exit 0 if running, 3 if not.
  env                      Print 'export KUBECONFIG=...' for this cluster.
  sa-kubeconfig NS NAME [OUT]
                           Write a kubeconfig that authenticates as ServiceAccount NS/NAME
                           with a TokenRequest token (creates the namespace and the
                           ServiceAccount if missing) and print its path.
  build [COMPONENT...]     Build and cache components (default kube-apiserver; any of
                           $KUBE_COMPONENTS, e2e.test)
                           from Debian's '$K8S_SRC_PACKAGE' source; print their paths.
  node-preflight           Exit 0 if 'up --node' can run here, else say why (installs missing
                           packages as root; takes down a node a killed run left behind).
  help, --help, -h         This text.

Environment:
  TEC_CLUSTER_DIR          State directory (default: <repo>/.local/cluster). Clusters with
                           different state directories can run at the same time.
  TEC_APISERVER_PORT       kube-apiserver secure port (default: the last one, or a free one).
  TEC_ETCD_PORT            etcd client port (default: the last one, or a free one).
  TEC_ETCD_PEER_PORT       etcd peer port (default: the last one, or a free one).
  TEC_READY_TIMEOUT        Seconds to wait for /readyz, the node, the controller (default 120).
  TEC_STOP_TIMEOUT         Seconds between SIGTERM and SIGKILL on 'down' (default 10).
  TEC_ETCD_QUOTA_BYTES     etcd's --quota-backend-bytes (default 2 GiB; bench/compare.sh: 8 GiB).
  TEC_APISERVER_GOMEMLIMIT Go's soft memory limit for kube-apiserver alone, e.g. 9GiB (default
                           none; bench/compare.sh sets one: see there).
  TEC_APISERVER_ARGS       Extra kube-apiserver flags, space-separated (default none), e.g.
                           '--max-requests-inflight=40 --max-mutating-requests-inflight=20'.
  TEC_BUILD_JOBS           Parallel Go compile jobs for 'build' (default: nproc).
  TEC_SA_TOKEN_DURATION    Lifetime of sa-kubeconfig tokens (default 24h).
  TEC_KUBELET_VERBOSITY    The kubelet's --v with --node (default 1).
  TEC_NODE_KCM_TAINT_MANAGER
                           1: kube-controller-manager's taint manager on with --node (default
                           0: off, the controller replaces it; make conformance-kcm sets 1).
  XDG_CACHE_HOME           Binaries are cached in
                           \${XDG_CACHE_HOME:-\$HOME/.cache}/taint-eviction-controller/kubernetes-$K8S_VERSION/bin,
                           images in .../taint-eviction-controller/images (images.sh).

State directory contents: admin.kubeconfig, env (ports and paths, sourceable), pki/ (CA,
serving cert, service-account keys, token file), etcd-data/, *.log, *.pid; with a node, node/
(containerd, kubelet, CNI, the recorded host state, the applied kustomization).
EOF
}

# ---------------------------------------------------------------------------------------------
# Building the Kubernetes components from Debian's source package
# ---------------------------------------------------------------------------------------------

# Bumped whenever the way we build changes, so binaries built the old way are rebuilt.
# 2: vendored reflect2 replaced by Debian's 1.0.2 (see use_debian_reflect2).
# 3: the components built with the providerless tag (see build_components); e2e.test keeps 2.
readonly BUILD_RECIPE=3 E2E_BUILD_RECIPE=2
readonly REFLECT2_PKG=golang-github-modern-go-reflect2-dev
readonly REFLECT2_SRC=/usr/share/gocode/src/github.com/modern-go/reflect2

cached_binary_ok() {
  local bin="$BIN_DIR/$1"
  [ -x "$bin" ] && "$bin" --version 2>/dev/null | grep -q "Kubernetes $K8S_VERSION\$" \
    && [ "$(cat "$BIN_DIR/.$1.recipe" 2>/dev/null)" = "$BUILD_RECIPE" ]
}

# Kubernetes 1.20 vendors github.com/modern-go/reflect2 v1.0.1, whose unsafe map iteration
# breaks on Go 1.18+ (modern-go/reflect2 #26): built with bookworm's Go 1.19, kube-apiserver
# now and then dies with SIGSEGV while encoding objects that carry labels or annotations
# (seen while listing 50,000 pods). Debian packages reflect2 1.0.2, which fixes it; put it in
# place of the vendored copy. Idempotent.
use_debian_reflect2() {
  local src=$1 dst="$1/vendor/github.com/modern-go/reflect2"
  [ -f "$src/.tec-reflect2-debian" ] && return 0
  if [ ! -f "$REFLECT2_SRC/reflect2.go" ]; then
    if ! is_root || ! command -v apt-get >/dev/null 2>&1; then
      die "$REFLECT2_SRC missing; install the Debian package '$REFLECT2_PKG'"
    fi
    log "installing $REFLECT2_PKG (reflect2 1.0.2 for Go 1.19)"
    apt_update_once
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$REFLECT2_PKG" >&2 \
      || die "apt-get install $REFLECT2_PKG failed"
  fi
  [ -d "$dst" ] || die "$dst not found in the Kubernetes source tree"
  rsync -a --delete --exclude '*_test.go' "$REFLECT2_SRC/" "$dst/" \
    || die "could not copy $REFLECT2_SRC into $dst"
  touch "$src/.tec-reflect2-debian"
}

# The components 'build' knows: everything a cluster with a real node runs.
readonly KUBE_COMPONENTS="kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy"

# build_components NAME...: make sure $BIN_DIR/NAME exists for every NAME, building the missing
# ones together (one Go build: they share most packages, so one build of three binaries costs
# little more than one).
build_components() {
  local name missing=()
  for name in "$@"; do
    case " $KUBE_COMPONENTS " in
      *" $name "*) ;;
      *) die "unknown component '$name' (expected one of: $KUBE_COMPONENTS)" ;;
    esac
    cached_binary_ok "$name" || missing+=("$name")
  done
  [ "${#missing[@]}" -gt 0 ] || return 0
  mkdir -p "$K8S_CACHE" "$BIN_DIR" "$BUILD_LOG_DIR"
  need_cmd flock util-linux
  local lock_fd
  exec {lock_fd}>"$K8S_CACHE/.build.lock"
  if ! flock -n "$lock_fd"; then
    log "another build is running (lock $K8S_CACHE/.build.lock); waiting for it"
    flock -w 3600 "$lock_fd" || die "timed out waiting for the build lock"
  fi
  local todo=()
  for name in "${missing[@]}"; do
    cached_binary_ok "$name" || todo+=("$name")
  done
  if [ "${#todo[@]}" -eq 0 ]; then
    exec {lock_fd}>&-
    return 0
  fi
  need_cmd go golang-go
  need_cmd make make
  need_cmd rsync rsync
  local src what="" tag buildlog start end
  tag=$(IFS=+; echo "${todo[*]}")
  buildlog="$BUILD_LOG_DIR/build-$tag.log"
  for name in "${todo[@]}"; do what+="${what:+ }cmd/$name"; done
  src=$(fetch_kubernetes_source)
  use_debian_reflect2 "$src"
  log "building ${todo[*]} $K8S_VERSION from $src (${BUILD_JOBS} jobs; usually 5-10 minutes; log: $buildlog)"
  start=$(date +%s)
  # What debian/rules does: GOPATH=<src>/.go with a k8s.io/kubernetes symlink to the tree,
  # CGO_ENABLED=0, then `make WHAT=cmd/<name>` (here its two halves, below); hack/lib/init.sh
  # sets GO111MODULE=off, so the vendor/ tree is used. The version (v1.20.2) comes from the git-archive stamp. The Go build
  # cache lives under $BUILD_WORK/home, so later builds of other components reuse it.
  if ! (
    exec {lock_fd}>&-
    cd "$src"
    mkdir -p .go/src/k8s.io "$BUILD_WORK/home"
    [ -L .go/src/k8s.io/kubernetes ] || ln -s ../../.. .go/src/k8s.io/kubernetes
    # GOGC=400: the Go compiler collects garbage a quarter as often (its heap grows to five
    # times the live data, a few hundred MB per compile here), which takes CPU out of a build
    # that is mostly compiling; the binaries are the same.
    # GOGCFLAGS=all=-dwarf=false: the compiler writes no debug information, which the link
    # (-s -w, hack/lib/golang.sh's default) threw away anyway: compiling the core/v1 API
    # package took 10.0 CPU-s against 12.0 (two runs each). hack/lib/golang.sh appends its
    # -trimpath, which the "all=" pattern now applies to every package, not only cmd/<name>.
    # -tags=providerless: without the in-tree cloud providers (AWS, Azure, GCE, OpenStack,
    # vSphere and their SDKs), which no local cluster configures (no --cloud-provider; none of
    # their flags is used here): the five components import 1,839 packages instead of 2,058 and
    # 55 MB of Go source instead of 95 MB. Upstream's own build tag for this (hack/lib/golang.sh
    # passes the -tags of GOFLAGS on to go; it must come last there).
    export GOPATH="$src/.go" CGO_ENABLED=0 GO111MODULE=off \
      GOFLAGS="-p=$BUILD_JOBS -tags=providerless" \
      GOGC=400 GOGCFLAGS="all=-dwarf=false" HOME="$BUILD_WORK/home" PATH="/usr/lib/go/bin:$PATH"
    unset GOBIN GOROOT
    # Not `make WHAT=...`: its generated_files step builds six code generators and rewrites
    # 506 files, all but one already in the source tarball (they differ from it only by a
    # `//go:build` line and go-bindata's timestamps). Only the OpenAPI definitions are missing,
    # and `make gen_openapi` writes them (the same bytes): 52 CPU-seconds where generated_files
    # took 120, and the serial minute or two before the compile starts.
    make gen_openapi || exit 1
    # shellcheck disable=SC2086 # one word per cmd/<name>
    exec hack/make-rules/build.sh $what
  ) >"$buildlog" 2>&1; then
    tail -n 40 "$buildlog" >&2
    die "building ${todo[*]} failed; full log: $buildlog"
  fi
  end=$(date +%s)
  for name in "${todo[@]}"; do
    local out="$src/_output/bin/$name"
    [ -x "$out" ] || die "build finished but $out is missing (log: $buildlog)"
    install -m 0755 "$out" "$BIN_DIR/.$name.tmp"
    mv -f "$BIN_DIR/.$name.tmp" "$BIN_DIR/$name"
    echo "$BUILD_RECIPE" >"$BIN_DIR/.$name.recipe"
    cached_binary_ok "$name" || die "$BIN_DIR/$name does not report Kubernetes $K8S_VERSION"
  done
  log "built ${todo[*]} in $((end - start)) s (in $BIN_DIR)"
  exec {lock_fd}>&-
}

# build_e2e_test: make sure $BIN_DIR/e2e.test exists: upstream's end-to-end test binary
# (test/e2e, the suite holding "NoExecuteTaintManager", tests/e2e-node/upstream_taints_test.sh),
# built from the same source and Go build cache as the components. The source tarball lacks
# test/e2e/generated/bindata.go (the manifests the suite embeds); hack/generate-bindata.sh writes
# it with the vendored go-bindata, as `make` would. Then hack/make-rules/build.sh builds the test
# binary the way `make WHAT=test/e2e/e2e.test` does (go test -c, the version stamped in).
build_e2e_test() {
  local out="$BIN_DIR/e2e.test"
  if [ -x "$out" ] && [ "$(cat "$BIN_DIR/.e2e.test.recipe" 2>/dev/null)" = "$E2E_BUILD_RECIPE" ]; then
    return 0
  fi
  mkdir -p "$K8S_CACHE" "$BIN_DIR" "$BUILD_LOG_DIR"
  need_cmd flock util-linux
  local lock_fd
  exec {lock_fd}>"$K8S_CACHE/.build.lock"
  if ! flock -n "$lock_fd"; then
    log "another build is running (lock $K8S_CACHE/.build.lock); waiting for it"
    flock -w 3600 "$lock_fd" || die "timed out waiting for the build lock"
  fi
  if [ -x "$out" ] && [ "$(cat "$BIN_DIR/.e2e.test.recipe" 2>/dev/null)" = "$E2E_BUILD_RECIPE" ]; then
    exec {lock_fd}>&-
    return 0
  fi
  need_cmd go golang-go
  need_cmd make make
  need_cmd rsync rsync
  local src buildlog="$BUILD_LOG_DIR/build-e2e.test.log" start end
  src=$(fetch_kubernetes_source)
  use_debian_reflect2 "$src"
  log "building e2e.test $K8S_VERSION from $src (${BUILD_JOBS} jobs; usually 5-10 minutes; log: $buildlog)"
  start=$(date +%s)
  if ! (
    exec {lock_fd}>&-
    cd "$src"
    mkdir -p .go/src/k8s.io "$BUILD_WORK/home"
    [ -L .go/src/k8s.io/kubernetes ] || ln -s ../../.. .go/src/k8s.io/kubernetes
    # The same environment as build_components (see there), but with the cloud providers: the
    # suite imports every provider's e2e helpers (test/e2e/framework/providers/*).
    export GOPATH="$src/.go" CGO_ENABLED=0 GO111MODULE=off GOFLAGS="-p=$BUILD_JOBS" \
      GOGC=400 GOGCFLAGS="all=-dwarf=false" HOME="$BUILD_WORK/home" PATH="/usr/lib/go/bin:$PATH"
    unset GOBIN GOROOT
    [ -f test/e2e/generated/bindata.go ] || hack/generate-bindata.sh || exit 1
    exec hack/make-rules/build.sh test/e2e/e2e.test
  ) >"$buildlog" 2>&1; then
    tail -n 40 "$buildlog" >&2
    die "building e2e.test failed; full log: $buildlog"
  fi
  end=$(date +%s)
  local built="$src/_output/bin/e2e.test"
  [ -x "$built" ] || die "build finished but $built is missing (log: $buildlog)"
  install -m 0755 "$built" "$BIN_DIR/.e2e.test.tmp"
  mv -f "$BIN_DIR/.e2e.test.tmp" "$out"
  echo "$E2E_BUILD_RECIPE" >"$BIN_DIR/.e2e.test.recipe"
  log "built e2e.test in $((end - start)) s (in $BIN_DIR)"
  exec {lock_fd}>&-
}

# ---------------------------------------------------------------------------------------------
# State: PKI, ports, kubeconfig, env file
# ---------------------------------------------------------------------------------------------

# sign_cert NAME SUBJECT EXTENSIONS: a key and a certificate signed by the cluster CA in
# $PKI_DIR/NAME.{key,crt}, with the given openssl extension lines.
sign_cert() {
  local name=$1 subject=$2 ext=$3
  printf '%s\n' "$ext" >"$PKI_DIR/$name.ext"
  if ! openssl req -new -newkey rsa:2048 -nodes -sha256 \
      -keyout "$PKI_DIR/$name.key" -out "$PKI_DIR/$name.csr" -subj "$subject" 2>/dev/null \
    || ! openssl x509 -req -sha256 -days 3650 -in "$PKI_DIR/$name.csr" \
      -CA "$PKI_DIR/ca.crt" -CAkey "$PKI_DIR/ca.key" -CAcreateserial \
      -extfile "$PKI_DIR/$name.ext" -out "$PKI_DIR/$name.crt" 2>/dev/null; then
    die "openssl: generating the certificate $name failed"
  fi
  rm -f "$PKI_DIR/$name.csr"
}

gen_pki() {
  need_cmd openssl openssl
  mkdir -p "$PKI_DIR"
  chmod 700 "$PKI_DIR"
  local old_umask
  old_umask=$(umask)
  umask 077
  if [ ! -s "$PKI_DIR/ca.crt" ] || [ ! -s "$PKI_DIR/ca.key" ]; then
    log "generating the cluster CA"
    openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 3650 \
      -keyout "$PKI_DIR/ca.key" -out "$PKI_DIR/ca.crt" \
      -subj "/CN=taint-eviction-controller-local-ca" \
      -addext "basicConstraints=critical,CA:TRUE" \
      -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" 2>/dev/null \
      || die "openssl: CA generation failed"
    rm -f "$PKI_DIR/apiserver.crt"
  fi
  # Certificates from before the node address was a SAN are replaced.
  if [ -s "$PKI_DIR/apiserver.crt" ] \
    && ! openssl x509 -noout -text -in "$PKI_DIR/apiserver.crt" 2>/dev/null | grep -q "IP Address:$NODE_IP"; then
    rm -f "$PKI_DIR/apiserver.crt"
  fi
  if [ ! -s "$PKI_DIR/apiserver.crt" ] || [ ! -s "$PKI_DIR/apiserver.key" ]; then
    log "generating the kube-apiserver serving certificate"
    sign_cert apiserver /CN=kube-apiserver "basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,DNS:localhost,IP:$SERVICE_FIRST_IP,IP:$NODE_IP,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  fi
  if [ ! -s "$PKI_DIR/sa.key" ] || [ ! -s "$PKI_DIR/sa.pub" ]; then
    log "generating the service-account key pair"
    if ! openssl genrsa -out "$PKI_DIR/sa.key" 2048 2>/dev/null \
      || ! openssl rsa -in "$PKI_DIR/sa.key" -pubout -out "$PKI_DIR/sa.pub" 2>/dev/null; then
      die "openssl: service-account key generation failed"
    fi
  fi
  if [ ! -s "$TOKEN_FILE" ]; then
    log "generating the admin token"
    printf '%s,admin,admin,"system:masters"\n' "$(openssl rand -hex 32)" >"$TOKEN_FILE"
  fi
  umask "$old_umask"
}

admin_token() { cut -d, -f1 "$TOKEN_FILE" | head -n1; }

# read_state KEY: value of KEY in the env file (empty if none).
read_state() {
  [ -f "$ENV_FILE" ] || return 0
  sed -n "s/^export $1=//p" "$ENV_FILE" | tail -n1 | tr -d "'\""
}

# port_in_use PORT [HOST]: something accepts connections on HOST (127.0.0.1):PORT.
port_in_use() {
  (exec 3<>"/dev/tcp/${2:-127.0.0.1}/$1") 2>/dev/null
}

# port_free PORT: a server can listen on PORT on 127.0.0.1. SO_REUSEADDR, as etcd and
# kube-apiserver (Go) set it: connections of a stopped server left in TIME_WAIT do not hold the
# port, so a restarted cluster ('down', then 'up') keeps its ports and kubeconfig.
port_free() {
  if command -v python3 >/dev/null 2>&1; then
    python3 - "$1" <<'EOF' 2>/dev/null
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(1)
finally:
    s.close()
EOF
  elif port_in_use "$1"; then
    return 1
  fi
}

# pick_port: a free TCP port on 127.0.0.1 not in the space-separated list $1.
pick_port() {
  local avoid=" ${1:-} " p i
  for i in $(seq 1 200); do
    if command -v python3 >/dev/null 2>&1; then
      p=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
    else
      p=$((20000 + RANDOM % 30000))
    fi
    case "$avoid" in *" $p "*) continue ;; esac
    if port_free "$p"; then
      echo "$p"
      return 0
    fi
    : "$i"
  done
  die "could not find a free TCP port on 127.0.0.1"
}

# choose_port ENV_VALUE STATE_VALUE AVOID: the explicit port, else the previous one if free,
# else a new free one.
choose_port() {
  local explicit=$1 previous=$2 avoid=$3 what=$4
  if [ -n "$explicit" ]; then
    [[ "$explicit" =~ ^[0-9]+$ ]] || die "$what port '$explicit' is not a number"
    port_free "$explicit" || die "$what port $explicit (from the environment) is already in use on 127.0.0.1"
    echo "$explicit"
  elif [ -n "$previous" ] && [[ "$previous" =~ ^[0-9]+$ ]] && port_free "$previous" \
       && [[ " $avoid " != *" $previous "* ]]; then
    echo "$previous"
  else
    pick_port "$avoid"
  fi
}

write_kubeconfig_file() {
  # write_kubeconfig_file OUT SERVER CA_FILE USER TOKEN NAMESPACE
  local out=$1 server=$2 ca=$3 user=$4 token=$5 ns=${6:-default} tmp
  tmp="$out.tmp.$$"
  (
    umask 077
    cat >"$tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: tec-local
  cluster:
    server: $server
    certificate-authority-data: $(base64 -w0 "$ca")
users:
- name: $user
  user:
    token: $token
contexts:
- name: $user@tec-local
  context:
    cluster: tec-local
    user: $user
    namespace: $ns
current-context: $user@tec-local
preferences: {}
EOF
  )
  mv -f "$tmp" "$out"
}

write_env_file() {
  local etcd_port=$1 etcd_peer_port=$2 api_port=$3 mode=$4
  cat >"$ENV_FILE.tmp" <<EOF
# taint-eviction-controller local cluster ($K8S_VERSION); source this file to use it.
export TEC_CLUSTER_DIR='$CLUSTER_DIR'
export TEC_CLUSTER_MODE='$mode'
export TEC_CLUSTER_APISERVER_HOST='$API_HOST'
export TEC_CLUSTER_APISERVER_PORT='$api_port'
export TEC_CLUSTER_APISERVER_URL='https://$API_HOST:$api_port'
export TEC_CLUSTER_ETCD_PORT='$etcd_port'
export TEC_CLUSTER_ETCD_PEER_PORT='$etcd_peer_port'
export TEC_CLUSTER_ETCD_URL='http://127.0.0.1:$etcd_port'
export TEC_CLUSTER_CA_FILE='$PKI_DIR/ca.crt'
export TEC_CLUSTER_KUBE_APISERVER='$BIN_DIR/kube-apiserver'
export KUBECONFIG='$KUBECONFIG_PATH'
EOF
  if [ "$mode" = node ]; then node_env_lines >>"$ENV_FILE.tmp"; fi
  mv -f "$ENV_FILE.tmp" "$ENV_FILE"
}

# ---------------------------------------------------------------------------------------------
# Processes
# ---------------------------------------------------------------------------------------------

# pid_of NAME: the recorded pid of NAME (etcd|kube-apiserver) if that process is alive and is
# really the one this state directory started (its command line names this state dir).
pid_of() {
  local name=$1 pidfile="$CLUSTER_DIR/$1.pid" pid
  [ -f "$pidfile" ] || return 1
  pid=$(tr -dc '0-9' <"$pidfile")
  [ -n "$pid" ] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  [ -r "/proc/$pid/cmdline" ] || return 1
  local cmdline
  cmdline=$(tr '\0' ' ' <"/proc/$pid/cmdline")
  case "$cmdline" in
    *"$name"*"$CLUSTER_DIR/"*) echo "$pid" ;;
    *) return 1 ;;
  esac
}

# start_daemon NAME CMD...: start CMD in its own session, detached from this shell, with its
# output in NAME.log and its pid in NAME.pid. Open file descriptors beyond 2 are not inherited.
start_daemon() {
  local name=$1
  shift
  local logf="$CLUSTER_DIR/$name.log" pidfile="$CLUSTER_DIR/$name.pid" i
  [ -f "$logf" ] && mv -f "$logf" "$logf.1"
  rm -f "$pidfile"
  # Close inherited descriptors above 2 (lock files), then let the inner sh write its own pid
  # and exec the daemon, so the pid is exact even when setsid has to fork.
  (
    for fdpath in /proc/"$BASHPID"/fd/*; do
      fd=${fdpath##*/}
      if [ "$fd" -gt 2 ] 2>/dev/null; then eval "exec $fd>&-" 2>/dev/null || true; fi
    done
    # shellcheck disable=SC2016 # expanded by the inner sh
    exec setsid sh -c 'echo $$ >"$0"; exec "$@"' "$pidfile" "$@"
  ) </dev/null >"$logf" 2>&1 &
  for i in $(seq 1 50); do
    [ -s "$pidfile" ] && break
    sleep 0.1
    : "$i"
  done
  [ -s "$pidfile" ] || die "$name did not start (no pid file); see $logf"
  STARTED+=("$name")
}

# stop_daemon NAME: SIGTERM, wait up to STOP_TIMEOUT s, then SIGKILL. Only the recorded pid.
stop_daemon() {
  local name=$1 pid i
  if pid=$(pid_of "$name"); then
    log "stopping $name (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 1 $((STOP_TIMEOUT * 10))); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
      : "$i"
    done
    if kill -0 "$pid" 2>/dev/null; then
      log "$name (pid $pid) did not exit after ${STOP_TIMEOUT}s; sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      for i in $(seq 1 50); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
        : "$i"
      done
    fi
  fi
  rm -f "$CLUSTER_DIR/$name.pid"
}

readyz_ok() {
  local port=$1
  curl -fsS --max-time 5 --cacert "$PKI_DIR/ca.crt" \
    -H "Authorization: Bearer $(admin_token)" \
    "https://$API_HOST:$port/readyz" >/dev/null 2>&1
}

print_log_tails() {
  local n
  for n in etcd kube-apiserver; do
    if [ -f "$CLUSTER_DIR/$n.log" ]; then
      if grep -Eq '^[EF][0-9]{4} |"level":"(error|fatal|panic)"|^Error:' "$CLUSTER_DIR/$n.log"; then
        printf '\n----- errors in %s -----\n' "$CLUSTER_DIR/$n.log" >&2
        grep -E '^[EF][0-9]{4} |"level":"(error|fatal|panic)"|^Error:' "$CLUSTER_DIR/$n.log" | tail -n 15 >&2
      fi
      printf '\n----- last lines of %s -----\n' "$CLUSTER_DIR/$n.log" >&2
      tail -n 25 "$CLUSTER_DIR/$n.log" >&2
    fi
  done
}

STARTED=()
UP_OK=0
cleanup_failed_up() {
  if [ "$UP_OK" -ne 1 ] && { [ "${#STARTED[@]}" -gt 0 ] || [ "$NODE_MODE" -eq 1 ]; }; then
    log "'up' failed; stopping what it started"
    # A half-started node is torn down completely (bridge, mounts, iptables, sysctls).
    if [ "$NODE_MODE" -eq 1 ]; then node_teardown || true; fi
    local i
    for ((i = ${#STARTED[@]} - 1; i >= 0; i--)); do
      stop_daemon "${STARTED[$i]}" || true
    done
  fi
}

print_export() {
  echo "export KUBECONFIG=$KUBECONFIG_PATH"
}

# The address kube-apiserver was started on (127.0.0.1, or the node address with --node).
load_api_host() {
  API_HOST=$(read_state TEC_CLUSTER_APISERVER_HOST)
  [ -n "$API_HOST" ] || API_HOST=127.0.0.1
}

# ---------------------------------------------------------------------------------------------
# Commands
# ---------------------------------------------------------------------------------------------

cmd_build() {
  [ $# -gt 0 ] || set -- kube-apiserver
  local components=() name
  for name in "$@"; do
    if [ "$name" = e2e.test ]; then build_e2e_test; else components+=("$name"); fi
  done
  [ "${#components[@]}" -eq 0 ] || build_components "${components[@]}"
  local name
  for name in "$@"; do echo "$BIN_DIR/$name"; done
}

# start_control_plane: etcd and kube-apiserver (flags for the plain cluster or, with
# NODE_MODE=1, for a cluster with a real node), then waits for /readyz and writes the admin
# kubeconfig and the env file. Sets API_PORT.
start_control_plane() {
  # Pick ports under a machine-wide lock so two concurrent 'up's cannot take the same ones.
  mkdir -p "$CACHE_ROOT"
  local port_fd etcd_port etcd_peer_port api_port
  exec {port_fd}>"$CACHE_ROOT/.ports.lock"
  # Held while a control plane binds its ports (up to a minute each on a busy machine), so
  # several clusters starting at once (the e2e lanes, the real node) queue here: wait long.
  flock -w 900 "$port_fd" || die "timed out waiting for $CACHE_ROOT/.ports.lock"
  etcd_port=$(choose_port "${TEC_ETCD_PORT:-}" "$(read_state TEC_CLUSTER_ETCD_PORT)" "" etcd)
  etcd_peer_port=$(choose_port "${TEC_ETCD_PEER_PORT:-}" "$(read_state TEC_CLUSTER_ETCD_PEER_PORT)" "$etcd_port" "etcd peer")
  api_port=$(choose_port "${TEC_APISERVER_PORT:-}" "$(read_state TEC_CLUSTER_APISERVER_PORT)" "$etcd_port $etcd_peer_port" kube-apiserver)

  mkdir -p "$ETCD_DATA_DIR"
  chmod 700 "$ETCD_DATA_DIR"
  log "starting etcd on 127.0.0.1:$etcd_port (peer $etcd_peer_port)"
  start_daemon etcd etcd \
    --name tec-local \
    --data-dir "$ETCD_DATA_DIR" \
    --listen-client-urls "http://127.0.0.1:$etcd_port" \
    --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$etcd_peer_port" \
    --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer_port" \
    --initial-cluster "tec-local=http://127.0.0.1:$etcd_peer_port" \
    --initial-cluster-state new \
    --initial-cluster-token "tec-local-$etcd_port" \
    --quota-backend-bytes "$ETCD_QUOTA_BYTES" \
    --logger zap
  local i ok=0
  for i in $(seq 1 60); do
    if curl -fsS --max-time 2 "http://127.0.0.1:$etcd_port/health" 2>/dev/null | grep -q '"health":"true"'; then
      ok=1
      break
    fi
    pid_of etcd >/dev/null || break
    sleep 0.5
    : "$i"
  done
  if [ "$ok" -ne 1 ]; then
    print_log_tails
    die "etcd did not become healthy on 127.0.0.1:$etcd_port"
  fi

  # The plain cluster: no ServiceAccount admission (no token controller runs) and no endpoint
  # reconciler (127.0.0.1 is not a valid endpoint). With a node: both, on the node address,
  # plus NodeRestriction and a client certificate for talking to the kubelet.
  local mode_flags=(
    --enable-admission-plugins=DefaultTolerationSeconds
    --disable-admission-plugins=ServiceAccount
    --endpoint-reconciler-type=none
  )
  if [ "$NODE_MODE" -eq 1 ]; then
    # shellcheck disable=SC2054 # the commas are in a flag's value
    mode_flags=(
      --enable-admission-plugins=DefaultTolerationSeconds,NodeRestriction
      --kubelet-client-certificate="$PKI_DIR/apiserver-kubelet-client.crt"
      --kubelet-client-key="$PKI_DIR/apiserver-kubelet-client.key"
      --kubelet-preferred-address-types=InternalIP
    )
  fi
  log "starting kube-apiserver $K8S_VERSION on https://$API_HOST:$api_port"
  local apiserver_env=()
  [ -n "$APISERVER_GOMEMLIMIT" ] && apiserver_env=(env "GOMEMLIMIT=$APISERVER_GOMEMLIMIT")
  start_daemon kube-apiserver "${apiserver_env[@]}" "$BIN_DIR/kube-apiserver" \
    --bind-address="$API_HOST" \
    --advertise-address="$API_HOST" \
    --secure-port="$api_port" \
    --insecure-port=0 \
    --etcd-servers="http://127.0.0.1:$etcd_port" \
    --cert-dir="$PKI_DIR" \
    --tls-cert-file="$PKI_DIR/apiserver.crt" \
    --tls-private-key-file="$PKI_DIR/apiserver.key" \
    --client-ca-file="$PKI_DIR/ca.crt" \
    --token-auth-file="$TOKEN_FILE" \
    --authorization-mode=Node,RBAC \
    --service-account-key-file="$PKI_DIR/sa.pub" \
    --service-account-signing-key-file="$PKI_DIR/sa.key" \
    --service-account-issuer="$SA_ISSUER" \
    --api-audiences="$SA_ISSUER" \
    --service-cluster-ip-range="$SERVICE_CLUSTER_IP_RANGE" \
    "${mode_flags[@]}" \
    "${APISERVER_EXTRA_ARGS[@]}" \
    --allow-privileged=true \
    --profiling=false \
    --logtostderr=true \
    --v=1
  # Release the port lock once kube-apiserver holds its port.
  for i in $(seq 1 300); do
    port_in_use "$api_port" "$API_HOST" && break
    pid_of kube-apiserver >/dev/null || break
    sleep 0.2
    : "$i"
  done
  exec {port_fd}>&-

  log "waiting up to ${READY_TIMEOUT}s for /readyz"
  local deadline=$((SECONDS + READY_TIMEOUT))
  ok=0
  while [ "$SECONDS" -lt "$deadline" ]; do
    if readyz_ok "$api_port"; then
      ok=1
      break
    fi
    if ! pid_of kube-apiserver >/dev/null; then
      print_log_tails
      die "kube-apiserver exited during startup"
    fi
    if ! pid_of etcd >/dev/null; then
      print_log_tails
      die "etcd exited during startup"
    fi
    sleep 1
  done
  if [ "$ok" -ne 1 ]; then
    print_log_tails
    die "kube-apiserver did not report /readyz OK within ${READY_TIMEOUT}s"
  fi

  write_kubeconfig_file "$KUBECONFIG_PATH" "https://$API_HOST:$api_port" "$PKI_DIR/ca.crt" admin "$(admin_token)"
  # Without a node the env file is final now; with one, node_start adds its ports later.
  local mode=plain
  [ "$NODE_MODE" -eq 1 ] && mode=node-starting
  write_env_file "$etcd_port" "$etcd_peer_port" "$api_port" "$mode"
  API_PORT=$api_port
}

cmd_up() {
  local arg controller_bin=""
  while [ $# -gt 0 ]; do
    arg=$1
    shift
    case "$arg" in
      --node) NODE_MODE=1 ;;
      --controller-binary)
        [ $# -gt 0 ] || die "--controller-binary needs a path"
        controller_bin=$(realpath -e "$1") || die "--controller-binary: $1 not found"
        shift
        ;;
      --controller-binary=*)
        controller_bin=$(realpath -e "${arg#*=}") || die "--controller-binary: ${arg#*=} not found"
        ;;
      *) die "up: unknown argument '$arg' (expected --node [--controller-binary PATH])" ;;
    esac
  done
  [ -z "$controller_bin" ] || [ "$NODE_MODE" -eq 1 ] || die "--controller-binary needs --node"
  need_cmd curl curl
  need_cmd setsid util-linux
  need_cmd flock util-linux
  need_cmd etcd etcd-server
  if [ "$NODE_MODE" -eq 1 ]; then
    node_preflight
    # shellcheck disable=SC2086 # a word list
    build_components $KUBE_COMPONENTS
    node_images "$controller_bin"
    API_HOST=$NODE_IP
  else
    build_components kube-apiserver
  fi

  mkdir -p "$CLUSTER_DIR"
  [ -f "$MARKER_FILE" ] || echo "taint-eviction-controller local cluster state ($K8S_VERSION)" >"$MARKER_FILE"

  # Serialise up/down on this state directory.
  local lock_fd
  exec {lock_fd}>"$CLUSTER_DIR/.lock"
  flock -w 300 "$lock_fd" || die "another '$PROG' is working on $CLUSTER_DIR (lock held for 5 minutes)"

  gen_pki
  [ "$NODE_MODE" -eq 1 ] && node_gen_pki

  local etcd_pid="" api_pid="" api_port running_mode
  etcd_pid=$(pid_of etcd || true)
  api_pid=$(pid_of kube-apiserver || true)
  api_port=$(read_state TEC_CLUSTER_APISERVER_PORT)
  running_mode=$(read_state TEC_CLUSTER_MODE)
  [ -n "$running_mode" ] || running_mode=plain
  if [ -n "$etcd_pid" ] && [ -n "$api_pid" ] && [ -n "$api_port" ] \
     && { [ "$NODE_MODE" -eq 0 ] || [ "$running_mode" = node ]; }; then
    # Running before (the env file is written only once /readyz was OK): give it a moment.
    # A cluster with a node also answers a plain 'up' (it is a superset).
    local saved_host=$API_HOST
    API_HOST=$(read_state TEC_CLUSTER_APISERVER_HOST)
    [ -n "$API_HOST" ] || API_HOST=127.0.0.1
    local healthy=0 until=$((SECONDS + 30))
    while [ "$SECONDS" -lt "$until" ]; do
      readyz_ok "$api_port" && { healthy=1; break; }
      if ! pid_of kube-apiserver >/dev/null || ! pid_of etcd >/dev/null; then break; fi
      sleep 1
    done
    if [ "$healthy" -eq 1 ] && [ "$running_mode" = node ] && ! node_alive; then
      healthy=0
    fi
    if [ "$healthy" -eq 1 ]; then
      [ -s "$KUBECONFIG_PATH" ] || write_kubeconfig_file "$KUBECONFIG_PATH" "https://$API_HOST:$api_port" "$PKI_DIR/ca.crt" admin "$(admin_token)"
      log "already running: kube-apiserver pid $api_pid on https://$API_HOST:$api_port, etcd pid $etcd_pid ($CLUSTER_DIR)"
      if [ "$NODE_MODE" -eq 1 ]; then
        # The image may have changed: apply it again (a new id is a new tag: a rollout).
        sed -i "s|^export TEC_CLUSTER_CONTROLLER_IMAGE=.*|export TEC_CLUSTER_CONTROLLER_IMAGE='$CONTROLLER_IMAGE'|" "$ENV_FILE"
        node_import_images
        node_deploy
      fi
      print_export
      return 0
    fi
    API_HOST=$saved_host
    log "processes are running but not all healthy (or in another mode); restarting them"
  fi
  # Partially running, unhealthy or the other mode: stop the leftovers and start afresh.
  trap cleanup_failed_up EXIT
  node_teardown
  stop_daemon kube-apiserver
  stop_daemon etcd

  if [ "$NODE_MODE" -eq 1 ]; then
    node_record_host_state
    node_create_bridge
  fi
  start_control_plane
  if [ "$NODE_MODE" -eq 1 ]; then
    node_start "https://$API_HOST:$API_PORT"
    node_deploy
    write_env_file "$(read_state TEC_CLUSTER_ETCD_PORT)" "$(read_state TEC_CLUSTER_ETCD_PEER_PORT)" "$API_PORT" node
  fi
  UP_OK=1
  trap - EXIT
  exec {lock_fd}>&-
  if [ "$NODE_MODE" -eq 1 ]; then
    log "cluster is up with a real node: kube-apiserver https://$API_HOST:$API_PORT, node $NODE_NAME Ready, controller $CONTROLLER_IMAGE available; state in $CLUSTER_DIR"
  else
    log "cluster is up: kube-apiserver pid $(pid_of kube-apiserver) https://$API_HOST:$API_PORT, etcd pid $(pid_of etcd) 127.0.0.1:$(read_state TEC_CLUSTER_ETCD_PORT); state in $CLUSTER_DIR"
  fi
  print_export
}

cmd_down() {
  local wipe=0 arg
  for arg in "$@"; do
    case "$arg" in
      --wipe) wipe=1 ;;
      *) die "down: unknown argument '$arg' (expected --wipe)" ;;
    esac
  done
  if [ ! -d "$CLUSTER_DIR" ]; then
    log "no cluster state in $CLUSTER_DIR; nothing to do"
    return 0
  fi
  local lock_fd
  if command -v flock >/dev/null 2>&1; then
    exec {lock_fd}>"$CLUSTER_DIR/.lock"
    flock -w 300 "$lock_fd" || die "another '$PROG' is working on $CLUSTER_DIR"
  fi
  if ! pid_of kube-apiserver >/dev/null && ! pid_of etcd >/dev/null; then
    log "not running ($CLUSTER_DIR)"
  fi
  # With a real node: pods, containers, mounts, the bridge, iptables chains, cgroups,
  # sysctls and host directories first, while kube-apiserver still runs.
  node_teardown
  stop_daemon kube-apiserver
  stop_daemon etcd
  if [ "$wipe" -eq 1 ]; then
    if [ -f "$MARKER_FILE" ]; then
      log "wiping $CLUSTER_DIR"
      rm -rf "$CLUSTER_DIR"
    else
      die "refusing to wipe $CLUSTER_DIR: it has no $(basename "$MARKER_FILE") marker"
    fi
  else
    log "stopped; state kept in $CLUSTER_DIR"
  fi
}

cmd_status() {
  local etcd_pid api_pid api_port mode node_ok=1
  load_api_host
  etcd_pid=$(pid_of etcd || true)
  api_pid=$(pid_of kube-apiserver || true)
  api_port=$(read_state TEC_CLUSTER_APISERVER_PORT)
  mode=$(read_state TEC_CLUSTER_MODE)
  echo "state dir:      $CLUSTER_DIR"
  if [ -n "$etcd_pid" ]; then
    echo "etcd:           running, pid $etcd_pid, http://127.0.0.1:$(read_state TEC_CLUSTER_ETCD_PORT)"
  else
    echo "etcd:           not running"
  fi
  if [ -n "$api_pid" ]; then
    echo "kube-apiserver: running, pid $api_pid, https://$API_HOST:$api_port"
  else
    echo "kube-apiserver: not running"
  fi
  if [ "$mode" = node ] || [ "$mode" = node-starting ]; then
    node_status_lines
    node_alive >/dev/null 2>&1 || node_ok=0
    [ "$mode" = node ] || node_ok=0
  fi
  if [ -n "$etcd_pid" ] && [ -n "$api_pid" ] && [ -n "$api_port" ] && [ -s "$TOKEN_FILE" ] \
     && [ "$node_ok" -eq 1 ] && readyz_ok "$api_port"; then
    echo "readyz:         ok"
    if [ "$mode" = node ]; then
      if node_is_ready; then echo "node:           $NODE_NAME Ready"; else echo "node:           $NODE_NAME not Ready"; fi
    fi
    echo "kubeconfig:     $KUBECONFIG_PATH"
    echo "status:         running"
    return 0
  fi
  [ -n "$api_pid" ] && echo "readyz:         not ok"
  echo "status:         not running"
  return 3
}

cmd_env() {
  [ -s "$KUBECONFIG_PATH" ] || die "no kubeconfig at $KUBECONFIG_PATH: run '$PROG up' first"
  print_export
}

cmd_sa_kubeconfig() {
  if [ $# -lt 2 ] || [ $# -gt 3 ]; then die "usage: $PROG sa-kubeconfig NAMESPACE NAME [OUT]"; fi
  local ns=$1 name=$2 out=${3:-}
  [ -n "$out" ] || out="$CLUSTER_DIR/sa-$ns-$name.kubeconfig"
  need_cmd kubectl kubernetes-client
  cmd_status >/dev/null || die "the cluster in $CLUSTER_DIR is not running: run '$PROG up' first"
  load_api_host
  local api_port k duration=${TEC_SA_TOKEN_DURATION:-24h} token
  api_port=$(read_state TEC_CLUSTER_APISERVER_PORT)
  k=(kubectl --kubeconfig "$KUBECONFIG_PATH" --request-timeout=30s)
  "${k[@]}" get namespace "$ns" >/dev/null 2>&1 \
    || "${k[@]}" create namespace "$ns" >/dev/null || die "cannot create namespace $ns"
  "${k[@]}" -n "$ns" get serviceaccount "$name" >/dev/null 2>&1 \
    || "${k[@]}" -n "$ns" create serviceaccount "$name" >/dev/null || die "cannot create serviceaccount $ns/$name"
  if kubectl create token --help >/dev/null 2>&1; then
    token=$("${k[@]}" -n "$ns" create token "$name" --duration="$duration") \
      || die "TokenRequest for $ns/$name failed"
  else
    # Older kubectl: call the TokenRequest API directly.
    local seconds
    case "$duration" in
      *h) seconds=$((${duration%h} * 3600)) ;;
      *m) seconds=$((${duration%m} * 60)) ;;
      *s) seconds=${duration%s} ;;
      *) seconds=$duration ;;
    esac
    token=$(curl -fsS --max-time 30 --cacert "$PKI_DIR/ca.crt" \
      -H "Authorization: Bearer $(admin_token)" -H 'Content-Type: application/json' \
      -X POST "https://$API_HOST:$api_port/api/v1/namespaces/$ns/serviceaccounts/$name/token" \
      -d "{\"apiVersion\":\"authentication.k8s.io/v1\",\"kind\":\"TokenRequest\",\"spec\":{\"expirationSeconds\":$seconds}}" \
      | sed -n 's/.*"token": *"\([^"]*\)".*/\1/p') || die "TokenRequest for $ns/$name failed"
  fi
  [ -n "$token" ] || die "TokenRequest for $ns/$name returned no token"
  mkdir -p "$(dirname "$out")"
  write_kubeconfig_file "$out" "https://$API_HOST:$api_port" "$PKI_DIR/ca.crt" "system:serviceaccount:$ns:$name" "$token" "$ns"
  echo "$out"
}

main() {
  local cmd=${1:-}
  [ $# -gt 0 ] && shift
  case "$cmd" in
    up) cmd_up "$@" ;;
    down) cmd_down "$@" ;;
    status) cmd_status ;;
    env) cmd_env ;;
    sa-kubeconfig) cmd_sa_kubeconfig "$@" ;;
    node-preflight) [ $# -eq 0 ] || die "node-preflight takes no arguments"; node_preflight; echo "a real node can run here" ;;
    build) cmd_build "$@" ;;
    help | --help | -h) usage ;;
    "") usage >&2; exit 2 ;;
    *) die "unknown command '$cmd' (see '$PROG --help')" ;;
  esac
}

main "$@"
