//go:build linux

package netguard

import (
	"fmt"

	"github.com/google/nftables"
)

// Install replaces the table in the network namespace of conn's options
// (the caller's own by default) with the rules of c, in one transaction:
// a restarted init container leaves exactly one copy, and a failure
// leaves the namespace as it was. It then reads the rules back, so a
// kernel that took the batch but lost a rule is an error, not a silently
// open pod.
func Install(c Config, opts ...nftables.ConnOption) error {
	conn, err := nftables.New(opts...)
	if err != nil {
		return fmt.Errorf("opening nftables: %w", err)
	}
	rs := Program(c)
	// Add, delete, add: creating a table that exists is not an error, so
	// the delete always has something to remove.
	conn.AddTable(rs.Table)
	conn.DelTable(rs.Table)
	conn.AddTable(rs.Table)
	for _, ch := range rs.Chains {
		conn.AddChain(ch)
	}
	for _, r := range rs.Rules {
		conn.AddRule(r)
	}
	if err := conn.Flush(); err != nil {
		return fmt.Errorf("installing table inet %s: %w", TableName, err)
	}
	return verify(conn, rs)
}

func verify(conn *nftables.Conn, rs Ruleset) error {
	want := map[string]int{}
	for _, r := range rs.Rules {
		want[r.Chain.Name]++
	}
	for _, ch := range rs.Chains {
		got, err := conn.GetRules(rs.Table, ch)
		if err != nil {
			return fmt.Errorf("reading back chain %s: %w", ch.Name, err)
		}
		if len(got) != want[ch.Name] {
			return fmt.Errorf("chain %s has %d rules after install, want %d", ch.Name, len(got), want[ch.Name])
		}
	}
	return nil
}
