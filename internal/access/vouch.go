package access

import "crypto/rand"

// Vouch returns a token that stands for c until end is called: a loop of
// c passes it to the tools it calls (tools.MetaCaller), and a loop that
// one of them starts through sampled's /mcp counts against c's loops
// (Vouched), whichever key the call to /mcp carried.
func (g *Guard) Vouch(c *Caller) (token string, end func()) {
	token = rand.Text()
	g.vouched.Store(token, c)
	return token, once(func() { g.vouched.Delete(token) })
}

// Vouched returns the caller a token of Vouch stands for, nil when it
// stands for none (any more).
func (g *Guard) Vouched(token string) *Caller {
	v, _ := g.vouched.Load(token)
	c, _ := v.(*Caller)
	return c
}
