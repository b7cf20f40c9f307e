#!/usr/bin/env bash
# Prints what a real node changes on the host, in a stable order, so a snapshot taken before
# `cluster.sh up --node` and one taken after `cluster.sh down` can be compared line by line:
# processes naming the state dir, mounts, network links and addresses, iptables and ip6tables
# rules, the sysctls the node's programs change, the host paths they create, the kubepods
# cgroups, network namespaces and containerd shim sockets.
#
# Usage: host_state.sh STATE_DIR
set -euo pipefail
state_dir=${1:?usage: host_state.sh STATE_DIR}

section() { printf '== %s\n' "$1"; }

section "processes naming $state_dir"
for d in /proc/[0-9]*; do
  [ "${d#/proc/}" = "$$" ] && continue
  cmd=$({ tr '\0' ' ' <"$d/cmdline"; } 2>/dev/null) || continue
  case "$cmd" in
    *host_state.sh*) ;;
    *"$state_dir/"*) echo "${cmd:0:200}" ;;
  esac
done | sort

# Not the image builder's: images.sh (buildah) mounts layers under its store while it builds,
# and image.dockerfile_build may be building beside the node tests.
image_store="${XDG_CACHE_HOME:-$HOME/.cache}/taint-eviction-controller/images/"
section mounts
awk -v store="$image_store" 'index($5, store) != 1 { print $5, $9 }' /proc/self/mountinfo | sort

section links
ip -o link show | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }' | sort
section addresses
ip -o addr show | awk '{ print $2, $3, $4 }' | sort

for save in iptables-save ip6tables-save; do
  section "$save"
  if command -v "$save" >/dev/null 2>&1; then
    # Rules and chains without packet counters or the generator comments.
    "$save" 2>/dev/null | grep -v '^#' | sed -E 's/ \[[0-9]+:[0-9]+\]$//' || true
  fi
done

section sysctls
for s in net.ipv4.ip_forward net.ipv4.conf.all.route_localnet \
  net.bridge.bridge-nf-call-iptables net.bridge.bridge-nf-call-ip6tables \
  vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops \
  kernel.keys.root_maxkeys kernel.keys.root_maxbytes net.netfilter.nf_conntrack_max \
  net.netfilter.nf_conntrack_tcp_timeout_established \
  net.netfilter.nf_conntrack_tcp_timeout_close_wait; do
  printf '%s=%s\n' "$s" "$(sysctl -n "$s" 2>/dev/null || echo absent)"
done

section paths
for p in /var/log/pods /var/log/containers /run/netns /var/run/netns /var/lib/cni \
  /run/containerd /opt/containerd /var/lib/kubelet /usr/libexec/kubernetes /etc/kubernetes; do
  if [ -e "$p" ]; then echo "$p exists"; else echo "$p absent"; fi
done

section cgroups
find /sys/fs/cgroup -mindepth 2 -maxdepth 2 -name kubepods 2>/dev/null | sort

section "network namespaces"
ls -1 /run/netns 2>/dev/null || true

section "containerd shim sockets"
ls -1 /run/containerd/s 2>/dev/null || true
