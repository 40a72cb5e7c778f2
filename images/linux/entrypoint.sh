#!/bin/sh
# Runs one part of a Linux node in the foreground, for one container of the node DaemonSet:
#   ovs             ovsdb-server and ovs-vswitchd (the host's openvswitch kernel module)
#   ovn-controller  waits for the OVS database, then runs ovn-controller; the SB address and
#                   the encapsulation come from the Open_vSwitch table, which ovnt-node fills,
#                   its TLS files from OVNT_SB_CLIENT_KEY, OVNT_SB_CLIENT_CERT, OVNT_SB_CA_CERT
#   node            ovnt-node (configured through OVNT_* variables)
#   master          ovnt-master
set -eu

ovs_run=/var/run/openvswitch

wait_for_ovsdb() {
	while [ ! -S "$ovs_run/db.sock" ]; do
		echo "waiting for $ovs_run/db.sock" >&2
		sleep 2
	done
}

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

case "${1:-node}" in
ovs)
	# ovs-ctl creates or upgrades the database and starts both daemons; it stops them again
	# when the container is told to stop, so the next start finds no stale pid files.
	trap '/usr/share/openvswitch/scripts/ovs-ctl stop; exit 0' TERM INT
	# ovs-ctl writes external_ids:system-id at every start, "" unless given one: keep the
	# one the database has (ovnt-node's choice, the chassis name the SB knows), or a
	# restarted container would rename the chassis under a running ovnt-node.
	set --
	db=/etc/openvswitch/conf.db
	if [ -f "$db" ]; then
		id=$(ovsdb-tool query "$db" '["Open_vSwitch",{"op":"select","table":"Open_vSwitch","where":[],"columns":["external_ids"]}]' |
			sed -n 's/.*\["system-id","\([^"]*\)"\].*/\1/p')
		if [ -n "$id" ]; then
			set -- --system-id="$id"
		fi
	fi
	# --no-record-hostname: ovnt-node records the chassis' hostname (the node name); the SB's
	# RBAC lets a chassis set its hostname only when it registers, so a second writer here
	# (the machine's hostname) would leave ovn-controller unable to write to the SB at all.
	/usr/share/openvswitch/scripts/ovs-ctl start --no-monitor --no-record-hostname "$@"
	while alive "$ovs_run/ovsdb-server.pid" && alive "$ovs_run/ovs-vswitchd.pid"; do
		sleep 5 &
		wait $! || true
	done
	echo "ovsdb-server or ovs-vswitchd exited" >&2
	exit 1
	;;
ovn-controller)
	wait_for_ovsdb
	mkdir -p /var/run/ovn
	# The files ovnt-node also writes into the SSL row; given here, they do not depend on
	# the agent having run. ovn-controller reads them again when they change.
	set -- "unix:$ovs_run/db.sock" --pidfile=/var/run/ovn/ovn-controller.pid -vconsole:info -vfile:off
	if [ -n "${OVNT_SB_CLIENT_KEY:-}" ]; then
		set -- "$@" --private-key="$OVNT_SB_CLIENT_KEY" --certificate="$OVNT_SB_CLIENT_CERT" \
			--ca-cert="$OVNT_SB_CA_CERT"
	fi
	exec ovn-controller "$@"
	;;
node)
	exec /usr/local/bin/ovnt-node
	;;
master)
	exec /usr/local/bin/ovnt-master
	;;
*)
	echo "usage: ovnt-entrypoint ovs|ovn-controller|node|master" >&2
	exit 2
	;;
esac
