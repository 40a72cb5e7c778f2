#!/usr/bin/env bash
# Checks the playbooks, offline, as CI does (make lint-deploy): ansible-lint with the
# production profile, a syntax check of every playbook, and the master and Linux node
# playbooks in check mode against this machine. Needs the Debian packages ansible and
# ansible-lint (installed here when missing and run as root); no Galaxy, no PyPI.
set -euo pipefail
cd "$(dirname "$0")"

missing=()
for p in ansible ansible-lint; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "ansible/ci.sh: missing Debian packages: ${missing[*]}; run as root" >&2
		exit 1
	fi
	echo "ansible/ci.sh: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [ ! -x ../_output/bin/ovnt-master ] || [ ! -x ../_output/bin/ovnt-node ] || [ ! -x ../_output/bin/ovnt-cni ]; then
	echo "ansible/ci.sh: run make build first (the check-mode runs copy _output/bin)" >&2
	exit 1
fi

export ANSIBLE_CONFIG=$PWD/ansible.cfg ANSIBLE_NOCOLOR=1 ANSIBLE_FORCE_COLOR=0 PY_COLORS=0
# ansible-lint keeps its cache in $HOME/.cache; nothing is downloaded with offline: true.
echo "== ansible-lint (production profile)"
ansible-lint --nocolor playbooks/ roles/

echo "== syntax check"
for pb in playbooks/*.yml; do
	ansible-playbook -i inventory/example/hosts.yml --syntax-check "$pb" >/dev/null
	echo "ok: $pb"
done

# Check mode: every task runs its check, nothing changes on this machine. Facts and the
# apt cache are read; services are looked at but not started.
for pb in master linux_node; do
	echo "== check mode: $pb against localhost"
	ansible-playbook -i localhost, -c local --check -e @ci/vars.yml \
		-e ovnt_target=localhost "playbooks/$pb.yml" 2>&1 | tail -n 25
done
