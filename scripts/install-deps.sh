#!/usr/bin/env bash
# Installs every Debian package the project needs to build, test and run its local clusters
# and build its images. Idempotent: it only calls apt-get when something is missing, and
# `apt-get update` at most once per run. Needs root (or sudo) the first time on a fresh Debian
# bookworm. `--fuzz` (what `make fuzz` needs: clang 14 and its runtime libraries, where Debian
# bookworm ships libFuzzer, libclang_rt.fuzzer*.a, and the sanitizer runtimes) adds nothing
# now: the asan and tsan presets need them too.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git ca-certificates curl openssl
  libboost1.81-dev libssl-dev nlohmann-json3-dev libsimdjson-dev libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev libyaml-cpp-dev libcli11-dev prometheus-cpp-dev
  clang-format clang-tidy
  # The asan and tsan presets compile with clang 14 (twice as fast as GCC on this code) and link
  # its sanitizer runtimes.
  clang-14 libclang-rt-14-dev
  etcd-server etcd-client golang-go golang-github-modern-go-reflect2-dev rsync dpkg-dev
  iproute2 procps psmisc ccache python3 jq
  # A real node (deploy/local/cluster.sh up --node) and local images (deploy/local/images.sh).
  # On a machine run by systemd, installing containerd starts a system containerd; the local
  # node runs its own, with its own socket and directories, beside it.
  containerd runc containernetworking-plugins iptables nftables conntrack buildah
  debootstrap busybox-static
  # The monitoring kit's tests (tests/monitoring/, tests/e2e/prometheus_test.sh): promtool and a
  # Prometheus server run from a temp dir. Installed below with service starts refused.
  prometheus
)

missing=()
for p in "${packages[@]}"; do
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
# kubectl: any kubectl on PATH will do; otherwise Debian's kubernetes-client (1.20).
if ! command -v kubectl >/dev/null 2>&1; then
  missing+=(kubernetes-client)
fi

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "install-deps: need root to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
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
