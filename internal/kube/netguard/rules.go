//go:build linux

package netguard

import (
	"encoding/binary"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// TableName is the inet table the rules live in.
const TableName = "mcpsidecar-netguard"

// Ruleset is the table, its two chains and their rules, in install order.
type Ruleset struct {
	Table  *nftables.Table
	Chains []*nftables.Chain
	Rules  []*nftables.Rule
}

// Program builds the rules for c. Both chains drop by policy; the rules
// list what is accepted. One inet table covers IPv4 and IPv6, so an
// address family the config never names is dropped too.
func Program(c Config) Ruleset {
	t := &nftables.Table{Name: TableName, Family: nftables.TableFamilyINet}
	drop := nftables.ChainPolicyDrop
	out := &nftables.Chain{Name: "output", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityFilter, Policy: &drop}
	in := &nftables.Chain{Name: "input", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter, Policy: &drop}
	rs := Ruleset{Table: t, Chains: []*nftables.Chain{out, in}}
	add := func(ch *nftables.Chain, e ...expr.Any) {
		rs.Rules = append(rs.Rules, &nftables.Rule{Table: t, Chain: ch, Exprs: append(e, accept())})
	}
	add(out, ifname(expr.MetaKeyOIFNAME, "lo")...)
	add(out, established()...)
	for _, d := range c.Allow {
		add(out, tcpTo(d)...)
	}
	add(in, ifname(expr.MetaKeyIIFNAME, "lo")...)
	add(in, established()...)
	return rs
}

func accept() expr.Any { return &expr.Verdict{Kind: expr.VerdictAccept} }

// ifname matches the interface name (nft pads names to IFNAMSIZ).
func ifname(key expr.MetaKey, name string) []expr.Any {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, name)
	return []expr.Any{
		&expr.Meta{Key: key, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: b},
	}
}

// established matches ct state established,related: the replies of
// connections this namespace opened (input) and the rest of their packets
// (output). New inbound connections are never in this state.
func established() []expr.Any {
	mask := make([]byte, 4)
	binary.NativeEndian.PutUint32(mask, expr.CtStateBitESTABLISHED|expr.CtStateBitRELATED)
	return []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: mask, Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: make([]byte, 4)},
	}
}

// tcpTo matches a new TCP packet to d: the address family, the
// destination address, TCP, the destination port.
func tcpTo(d Dest) []expr.Any {
	fam, off := byte(unix.NFPROTO_IPV4), uint32(16) // IPv4 header: daddr at 16
	if d.Addr().Is6() {
		fam, off = unix.NFPROTO_IPV6, 24 // IPv6 header: daddr at 24
	}
	addr := d.Addr().AsSlice()
	port := binary.BigEndian.AppendUint16(nil, d.Port())
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{fam}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: uint32(len(addr))},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: addr},
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: port},
	}
}
