package ovsdbtest

import "net"

func dialUnix(path string) error {
	c, err := net.Dial("unix", path)
	if err != nil {
		return err
	}
	return c.Close()
}
