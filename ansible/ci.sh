#!/usr/bin/env bash
# Checks the playbooks, offline, as CI does (make lint-deploy): ansible-lint with the
# production profile, a syntax check of every playbook, and the OVN central, master and Linux
# node playbooks in check mode against this machine. Needs the Debian packages ansible and
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

# The flags the roles pass must be flags of the binaries, with values of the right type:
# each rendered command line is given to the binary with --help, which parses the flags
# (and refuses unknown ones) and exits instead of running.
echo "== rendered command lines against the binaries"
render=$(mktemp -d)
trap 'rm -rf "$render"' EXIT
ansible-playbook -i ci/render-inventory.yml -e "ovnt_render_dir=$render" ci/render.yml >/dev/null
exec_args() { # the arguments of the ExecStart= of a unit, one per line, %d as a path
	sed -n '/^ExecStart=/,/[^\\]$/p' "$1" | sed -e 's/^ExecStart=[^ ]*//' -e 's/\\$//' -e 's/%d/\/run\/credentials/' | xargs -n1
}
for unit in ovnt-master ovnt-node; do
	mapfile -t args < <(exec_args "$render/$unit.service")
	[ ${#args[@]} -gt 4 ] || { echo "ansible/ci.sh: no ExecStart arguments in $unit.service" >&2; exit 1; }
	../_output/bin/$unit "${args[@]}" --help >/dev/null
	# TLS to the OVN databases (security audit C1): the client's three files are given.
	side=nb; [ $unit = ovnt-node ] && side=sb
	for f in --$side-client-cert --$side-client-key --$side-ca-cert; do
		printf '%s\n' "${args[@]}" | grep -qx -- "$f" || { echo "ansible/ci.sh: $unit.service has no $f" >&2; exit 1; }
	done
	echo "ok: $unit.service (${#args[@]} arguments)"
done
# The health port's firewall on the network: loopback and the allowed sources, nobody else.
for rule in 'tcp dport 9477 iif "lo" accept' 'tcp dport 9477 ip saddr { 192.0.2.0/24 } accept' \
	'tcp dport 9477 ip6 saddr { 2001:db8::/64 } accept' 'tcp dport 9477 drop' 'table inet ovnt_node_health {'; do
	grep -qF -- "$rule" "$render/ovnt-node-health.nft" || { echo "ansible/ci.sh: the health firewall lacks: $rule" >&2; cat "$render/ovnt-node-health.nft" >&2; exit 1; }
done
echo "ok: health port firewall"
# The relay of a remote chassis (docs/remote-chassis.md), for a chassis win1: its flags, and
# TLS to the node (no --allow-plaintext).
mapfile -t args < <(exec_args "$render/ovnt-chassis-relay@.service" | sed -e 's/%i/win1/g' -e 's/\${NODE_ADDRESS}/192.0.2.50/')
[ "${args[0]:-}" = chassis-relay ] || { echo "ansible/ci.sh: ovnt-chassis-relay@.service does not run chassis-relay: ${args[*]}" >&2; exit 1; }
../_output/bin/ovnt-node "${args[@]}" --help >/dev/null
if printf '%s\n' "${args[@]}" | grep -q -- --allow-plaintext; then
	echo "ansible/ci.sh: ovnt-chassis-relay@.service relays in plain TCP" >&2; exit 1
fi
echo "ok: ovnt-chassis-relay@.service (${#args[@]} arguments)"
# The remote controllers the masters run: one for every Windows node (its node name and
# address), none for a Windows node that says it is not remote, and one for a Linux node
# that says it is (ci/render-inventory.yml).
python3 - "$render/remote-chassis.json" <<'PY'
import json, sys
got = json.load(open(sys.argv[1]))
want = [{"name": "win1", "address": "192.0.2.41"}, {"name": "winnode2", "address": "198.51.100.42"},
        {"name": "linux2", "address": "192.0.2.32"}]
assert got == want, got
PY
echo "ok: remote controllers of the inventory's Windows nodes and flagged nodes"
# The Windows service: its binary path is one command line, which Go splits into os.Args
# by the Windows rules (ci/winargv.py does the same); first the quoting, then the flags.
python3 ci/winargv.py "$render/ovnt-node.windows.quoting.path" "$render/ovnt-node.windows.quoting.json" >/dev/null
echo "ok: Windows service binary path quoting"
mapfile -t -d '' args < <(python3 ci/winargv.py "$render/ovnt-node.windows.path")
[ "${args[0]:-}" = 'C:\ovn-transparent\bin\ovnt-node.exe' ] && [ ${#args[@]} -gt 4 ] || {
	echo "ansible/ci.sh: unexpected Windows service binary path: $(cat "$render/ovnt-node.windows.path")" >&2
	exit 1
}
../_output/bin/ovnt-node "${args[@]:1}" --help >/dev/null
for f in --uplink-interface --ovs-rundir; do
	printf '%s\n' "${args[@]}" | grep -q -- "^$f=" || { echo "ansible/ci.sh: the Windows service has no $f" >&2; exit 1; }
done
# The MSI's ovsdb-server serves a named pipe only: the role adds this loopback listener.
printf '%s\n' "${args[@]}" | grep -qx -- "--ovs-address=tcp:127.0.0.1:6639" || { echo "ansible/ci.sh: the Windows service's --ovs-address is not the role's listener" >&2; exit 1; }
# A Windows node is a remote chassis (docs/remote-chassis.md): its agent opens the TLS
# listeners of the database and br-int, and has no SB identity (the agent refuses both
# together); in plain TCP only with --listen-plaintext; a node that is not remote has its
# SB client certificate and no listener.
want_flags() { # file, then the flags (with values) its arguments must have and not have (!flag)
	local f=$1 w; shift
	mapfile -t -d '' a < <(python3 ci/winargv.py "$f")
	../_output/bin/ovnt-node "${a[@]:1}" --help >/dev/null
	for w in "$@"; do
		if [ "${w#!}" != "$w" ]; then
			if printf '%s\n' "${a[@]}" | grep -q -- "^${w#!}"; then echo "ansible/ci.sh: $(basename "$f"): has ${w#!}" >&2; exit 1; fi
		elif ! printf '%s\n' "${a[@]}" | grep -Fqx -- "$w"; then
			echo "ansible/ci.sh: $(basename "$f"): no $w in ${a[*]}" >&2; exit 1
		fi
	done
}
want_flags "$render/ovnt-node.windows.path" --ovsdb-listen=pssl:6640 --openflow-listen=pssl:6653 \
	'!--listen-plaintext' '!--sb-client-' '!--ovsdb-listen=ptcp' '!--openflow-listen=ptcp'
want_flags "$render/ovnt-node.windows.plaintext.path" --ovsdb-listen=ptcp:6640 --openflow-listen=ptcp:6653 \
	--listen-plaintext '!--sb-client-'
want_flags "$render/ovnt-node.windows.local.path" --sb-client-cert='C:\ovn-transparent\pki\ovnt-node-cert.pem' \
	--sb-client-key='C:\ovn-transparent\pki\ovnt-node-privkey.pem' --sb-ca-cert='C:\ovn-transparent\pki\cacert.pem' \
	'!--ovsdb-listen' '!--openflow-listen' '!--listen-plaintext'
echo "ok: Windows agent's listeners (TLS, plain TCP on request) and SB identity (not remote)"
# The MSI's Open vSwitch services: each binary path the role writes is the MSI's (that of
# OVS 3.7.1, which the Windows tests also start ovsdb-server from) plus exactly what the
# role adds in the node's mode, whatever an earlier run left; the options are given to the
# real ovsdb-server and ovs-vswitchd.
python3 - "$render" <<'PY'
import json, sys
sys.path.insert(0, "ci")
from winargv import split
d = json.load(open("../node/hns/hnstest/testdata/ovs-services.json"))
for svc in ("ovsdb-server", "ovs-vswitchd"):
    for mode in ("remote", "remote-plaintext", "local"):
        want = split(d["msi"][svc]) + [a for o in d["role"][mode][svc] for a in split(o)]
        for origin in ("msi", "earlier"):
            got = split(open("%s/%s.windows.%s.%s.path" % (sys.argv[1], svc, mode, origin)).read().rstrip("\n"))
            assert got == want, (svc, mode, origin, got, want)
PY
for svc in ovsdb-server ovs-vswitchd; do
	mapfile -t -d '' a < <(python3 ci/winargv.py "$render/$svc.windows.remote.earlier.path")
	[ "${a[0]:-}" = 'C:\Program Files\Open vSwitch\bin\'"$svc.exe" ] || { echo "ansible/ci.sh: $svc's binary path: ${a[*]}" >&2; exit 1; }
	want=(--private-key='C:\ovn-transparent\pki\listener-privkey.pem' --certificate='C:\ovn-transparent\pki\listener-cert.pem'
		--ca-cert='C:\ovn-transparent\pki\controllers-cacert.pem')
	[ $svc = ovsdb-server ] && want+=(--remote=ptcp:6639:127.0.0.1 --remote=db:Open_vSwitch,Open_vSwitch,manager_options)
	/usr/sbin/$svc "${want[@]}" --help >/dev/null 2>&1 || { echo "ansible/ci.sh: $svc refuses ${want[*]}" >&2; /usr/sbin/$svc "${want[@]}" --help >&2; exit 1; }
done
echo "ok: Open vSwitch services: the MSI's command lines plus the role's options (loopback listener, Manager rows, listener TLS files)"
# The firewall: the two listener ports, from the remote controllers' addresses only.
python3 - "$render/windows-firewall.json" <<'PY'
import json, sys
rules = {r["localport"]: r for r in json.load(open(sys.argv[1]))}
assert sorted(rules) == ["6640", "6653"], rules
for r in rules.values():
    assert r["state"] == "present" and r["remoteip"] == "192.0.2.11/32,192.0.2.12/32", r
PY
echo "ok: Windows firewall of the listener ports (remote controllers only)"
# containerd's CNI settings land in its CNI table, as TOML, for containerd 1.7 and 2.x.
python3 - "$render" <<'PY'
import sys, tomllib
d = sys.argv[1]
v2 = tomllib.load(open(d + "/containerd-cni.v2.toml", "rb"))["plugins"]["io.containerd.grpc.v1.cri"]["cni"]
v3 = tomllib.load(open(d + "/containerd-cni.v3.toml", "rb"))["plugins"]["io.containerd.cri.v1.runtime"]["cni"]
assert v2 == {"bin_dir": "C:/opt/cni/bin", "conf_dir": "C:/etc/cni/net.d"}, v2
assert v3 == {"bin_dirs": ["C:/opt/cni/bin"], "conf_dir": "C:/etc/cni/net.d"}, v3
PY
echo "ok: containerd CNI settings (config versions 2 and 3)"
echo "ok: Windows ovnt-node service ($((${#args[@]} - 1)) arguments)"
# OVN central: every option is one ovn-ctl knows; only the joining members name a remote.
known=$({ /usr/share/ovn/scripts/ovn-ctl --help 2>&1 || true; } | grep -o -- '--[a-z0-9-]*' | sort -u)
for m in central1 central2 central3; do
	f=$render/ovn-central.$m
	(set -a; . "$f"; for o in $OVN_CTL_OPTS; do
		grep -qx -- "${o%%=*}" <<<"$known" || { echo "ansible/ci.sh: ovn-ctl has no option ${o%%=*} ($m)" >&2; exit 1; }
	done)
	# TLS everywhere (security audit C1): no plain TCP remote, RAFT links over ssl, the
	# databases' and northd's TLS files given, northd's remotes ssl:.
	if grep -q -- 'insecure-remote' "$f"; then echo "ansible/ci.sh: $m: a plain TCP remote" >&2; exit 1; fi
	for o in --db-nb-cluster-local-proto=ssl --db-sb-cluster-local-proto=ssl --ovn-nb-db-ssl-key= \
		--ovn-sb-db-ssl-key= --ovn-northd-ssl-key= --ovn-northd-nb-db=ssl: --ovn-northd-sb-db=ssl:; do
		grep -q -- "$o" "$f" || { echo "ansible/ci.sh: $m: no $o" >&2; cat "$f" >&2; exit 1; }
	done
	if grep -o -- '-proto=[a-z]*' "$f" | grep -qv -- '-proto=ssl'; then
		echo "ansible/ci.sh: $m: a RAFT link without ssl" >&2; exit 1
	fi
	remote=$(grep -c -- '--db-nb-cluster-remote-addr' "$f" || true)
	want=1; [ $m = central1 ] && want=0
	[ "$remote" = $want ] || { echo "ansible/ci.sh: $m: $remote cluster remote lines, want $want" >&2; cat "$f" >&2; exit 1; }
done
echo "ok: ovn-central options of a 3-member RAFT cluster"

# Check mode: every task runs its check, nothing changes on this machine. Facts and the
# apt cache are read; services are looked at but not started.
# The whole output is shown only when a run fails; service tasks fail harmlessly here (see
# README.md), which would only be noise otherwise.
for pb in ovn_central master linux_node; do
	echo "== check mode: $pb against localhost"
	if ! ansible-playbook -i localhost, -c local --check -e @ci/vars.yml \
		-e ovnt_target=localhost "playbooks/$pb.yml" >"$render/$pb.out" 2>&1; then
		cat "$render/$pb.out"
		exit 1
	fi
	grep -A1 '^PLAY RECAP' "$render/$pb.out" | tail -n 1
done
