//go:build !windows

package doctor

import "github.com/ovn-transparent/ovn-transparent/node/hns"

// Host returns nothing off Windows: there is no HNS to check.
func Host() (hns.HNS, hns.IPHelper, string) { return nil, nil, "" }
