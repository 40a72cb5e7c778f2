package doctor

import "github.com/ovn-transparent/ovn-transparent/node/hns"

// Host returns the Windows host's HNS and IP Helper.
func Host() (hns.HNS, hns.IPHelper, string) { return hns.NewHCN(), hns.NewIPHelper(), ".exe" }
