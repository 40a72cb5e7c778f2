package agent

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
)

// checkChassisCert fails unless the certificate in certFile names the chassis systemID as
// its common name. The SB's ovn-controller role identifies a chassis by that name: with any
// other, ovn-controller connects but every write of its Chassis row is refused, and the node
// never serves pods. The mismatch happens when the host already had a system-id (Debian's
// ovs-ctl makes a random one unless /etc/openvswitch/system-id.conf says otherwise), which
// the agent keeps.
func checkChassisCert(certFile, systemID string) error {
	data, err := os.ReadFile(certFile)
	if err != nil {
		return fmt.Errorf("SB client certificate: %w", err)
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		return fmt.Errorf("SB client certificate %s: no PEM certificate in it", certFile)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return fmt.Errorf("SB client certificate %s: %w", certFile, err)
	}
	if cert.Subject.CommonName != systemID {
		return fmt.Errorf("SB client certificate %s is for %q, but this chassis is %q (external_ids:system-id): the SB's ovn-controller role would refuse its writes; issue the certificate for %q or set the system-id",
			certFile, cert.Subject.CommonName, systemID, systemID)
	}
	return nil
}
