package hostnet

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The legacy ethtool ioctl for TX checksumming, the feature `ethtool -K IF tx off` turns
// off. The kernel maps it onto every checksum-offload feature bit (NETIF_F_CSUM_MASK) and
// drops the features that depend on it (TSO, GSO) by itself.
const ethtoolSTXCSUM = 0x17

// ethtoolValue is struct ethtool_value.
type ethtoolValue struct {
	cmd  uint32
	data uint32
}

// ifreqData is struct ifreq with ifr_data, padded to the union's size.
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [24 - unsafe.Sizeof(uintptr(0))]byte
}

// disableTxChecksum turns off TX checksum offload on the interface called name in the
// calling thread's network namespace.
//
// Why: on the userspace datapath ovs-vswitchd reads the host end of a veth through an
// AF_PACKET socket, which hands it packets whose checksum the sender left to the "hardware"
// (CHECKSUM_PARTIAL); OVS forwards them as they are, the receiver drops them, and TCP
// silently fails while ping works. Both ends of every veth, and the management port, need it.
func disableTxChecksum(name string) error {
	if err := ethtool(name, &ethtoolValue{cmd: ethtoolSTXCSUM, data: 0}); err != nil {
		return fmt.Errorf("turning TX checksum offload off on %s: %w", name, err)
	}
	return nil
}

func ethtool(name string, v *ethtoolValue) error {
	if len(name) >= unix.IFNAMSIZ {
		return fmt.Errorf("interface name %q too long", name)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var ifr ifreqData
	copy(ifr.name[:], name)
	ifr.data = unsafe.Pointer(v)
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
	if errno != 0 {
		return errno
	}
	return nil
}
