package main

const (
	defaultOVSAddress = "unix:/var/run/openvswitch/db.sock"
	defaultOVSRunDir  = "/var/run/openvswitch"
	defaultCNISocket  = "/var/run/ovn-transparent/cni.sock"
	defaultCNIBinDir  = "/opt/cni/bin"
	defaultCNIConfDir = "/etc/cni/net.d"
)
