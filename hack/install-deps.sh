#!/usr/bin/env bash
# Installs what the tests and the sandbox need on a fresh Debian 12 machine, and nothing when
# it is already there. The daemons are started by the test harness itself, never through
# their systemd units.
set -euo pipefail

pkgs=(ovn-central ovn-host openvswitch-switch etcd-server containerd runc busybox-static containernetworking-plugins mmdebstrap
      iproute2 ethtool tcpdump socat iputils-ping curl openssl procps psmisc util-linux)
# `make deploy-test` also builds the image and runs Ansible over SSH (test/deployreal).
if [ "${1:-}" = deploy ]; then
	pkgs+=(buildah ansible openssh-client)
fi
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
	exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "install-deps: missing Debian packages: ${missing[*]}; run as root (make test does)" >&2
	exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# policy-rc.d keeps the packages' own services from starting: the harness runs every daemon
# itself, in its own directories, and a system ovsdb-server would only be in the way.
trap 'rm -f /usr/sbin/policy-rc.d' EXIT
printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
chmod +x /usr/sbin/policy-rc.d
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
