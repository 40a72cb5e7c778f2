package chassisrelay

import (
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"github.com/ovn-transparent/ovn-transparent/internal/ovsdb"
)

// The sockets a node's relays make in its ovn-controller's run directory.
const (
	// DBSocket is the node's database: ovn-controller's database is unix:<rundir>/db.sock.
	DBSocket = "db.sock"
	// OFSocket is the node's br-int, where ovn-controller 23.03 dials for OpenFlow.
	OFSocket = "br-int.mgmt"
)

// NodeRelays are the relays of one remote chassis' ovn-controller whose run directory is
// dir: <dir>/db.sock to the database listener at address:ovsdbPort and, unless openflowPort
// is 0 (an ovn-controller with ovn-bridge-remote), <dir>/br-int.mgmt to br-int's listener.
// With tlsCfg they dial ssl: with it, else plain tcp:.
func NodeRelays(dir, address string, ovsdbPort, openflowPort int, tlsCfg *ovsdb.Config, dialTimeout time.Duration) ([]*Relay, error) {
	scheme := "tcp"
	if tlsCfg != nil {
		scheme = "ssl"
	}
	var relays []*Relay
	for _, p := range []struct {
		port   int
		socket string
	}{{ovsdbPort, DBSocket}, {openflowPort, OFSocket}} {
		if p.port == 0 && p.socket == OFSocket {
			continue
		}
		if p.port < 1 || p.port > 65535 {
			return nil, fmt.Errorf("chassisrelay: port %d: not a port", p.port)
		}
		r := &Relay{
			Listen:      filepath.Join(dir, p.socket),
			Target:      scheme + ":" + net.JoinHostPort(address, strconv.Itoa(p.port)),
			DialTimeout: dialTimeout,
		}
		if tlsCfg != nil {
			var err error
			// ClientTLS reads the files again for every connection: renewed ones need no
			// restart.
			if r.TLS, err = ovsdb.ClientTLS(*tlsCfg, r.Target); err != nil {
				return nil, err
			}
		}
		relays = append(relays, r)
	}
	return relays, nil
}
