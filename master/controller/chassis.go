package controller

import "sync"

// chassisClaims is which node's gateway router each OVN chassis carries. A node agent names
// its chassis in its Node's annotation, which the agent of any node can write (and a
// compromised node can forge); binding a second node's gateway router to a chassis would
// move that node's north-south traffic and NodePorts through it. So a chassis carries the
// router of the first node that claimed it, until that node is deleted or names another
// chassis. The master's record is the gateway routers' options:chassis in NB, read back at
// start-up (rebuild).
type chassisClaims struct {
	mu     sync.Mutex
	owner  map[string]string // chassis -> node
	byNode map[string]string // node -> chassis
}

func newChassisClaims() *chassisClaims {
	return &chassisClaims{owner: map[string]string{}, byNode: map[string]string{}}
}

// claim gives chassis to node unless another node holds it; the node's previous chassis, if
// any, is free again. It returns the node that holds chassis afterwards. Claiming a chassis
// the node already holds changes nothing.
func (c *chassisClaims) claim(node, chassis string) (owner string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if o, held := c.owner[chassis]; held && o != node {
		return o
	}
	if prev, ok := c.byNode[node]; ok && prev != chassis {
		delete(c.owner, prev)
	}
	c.owner[chassis], c.byNode[node] = node, chassis
	return node
}

// held returns the chassis node holds, if any.
func (c *chassisClaims) held(node string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch, ok := c.byNode[node]
	return ch, ok
}

// release frees the chassis of node (deleted, or without a gateway router any more).
func (c *chassisClaims) release(node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ch, ok := c.byNode[node]; ok {
		delete(c.owner, ch)
		delete(c.byNode, node)
	}
}
