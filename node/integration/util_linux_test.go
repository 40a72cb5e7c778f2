package integration

import (
	"errors"

	"github.com/containernetworking/cni/pkg/types"
)

// cniCode is the CNI error code in err's chain, 0 if none.
func cniCode(err error) uint {
	var e *types.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}
