module github.com/ovn-transparent/ovn-transparent/test/cniruntime

go 1.24

require github.com/containernetworking/cni v1.1.2
