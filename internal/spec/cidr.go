package spec

import (
	"net/netip"
	"slices"
)

// addrRange is the inclusive range lo..hi of one address family.
type addrRange struct{ lo, hi netip.Addr }

func prefixRange(p netip.Prefix) addrRange {
	p = p.Masked()
	return addrRange{p.Addr(), lastAddr(p)}
}

// lastAddr is the highest address in p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// mergeRanges sorts rs and joins the overlapping and adjacent ones.
func mergeRanges(rs []addrRange) []addrRange {
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(a, b addrRange) int { return a.lo.Compare(b.lo) })
	var out []addrRange
	for _, r := range rs {
		if n := len(out); n > 0 && touches(out[n-1], r) {
			if out[n-1].hi.Less(r.hi) {
				out[n-1].hi = r.hi
			}
			continue
		}
		out = append(out, r)
	}
	return out
}

// touches reports whether r (sorted after prev) overlaps or adjoins prev.
func touches(prev, r addrRange) bool {
	if prev.lo.BitLen() != r.lo.BitLen() {
		return false
	}
	next := prev.hi.Next()
	return !next.IsValid() || !next.Less(r.lo) // invalid: prev ends the family
}

// subtractRanges removes every address of cut from rs (both merged).
func subtractRanges(rs, cut []addrRange) []addrRange {
	out := rs
	for _, c := range cut {
		var next []addrRange
		for _, r := range out {
			if r.lo.BitLen() != c.lo.BitLen() || c.hi.Less(r.lo) || r.hi.Less(c.lo) {
				next = append(next, r)
				continue
			}
			if r.lo.Less(c.lo) {
				next = append(next, addrRange{r.lo, c.lo.Prev()})
			}
			if c.hi.Less(r.hi) {
				next = append(next, addrRange{c.hi.Next(), r.hi})
			}
		}
		out = next
	}
	return out
}

// rangePrefixes is the shortest list of prefixes covering exactly r.
func rangePrefixes(r addrRange) []netip.Prefix {
	var out []netip.Prefix
	for lo := r.lo; ; {
		bits := lo.BitLen()
		// Widen while the prefix stays aligned on lo and inside r.
		for bits > 0 {
			p := netip.PrefixFrom(lo, bits-1)
			if p.Masked().Addr() != lo || r.hi.Less(lastAddr(p)) {
				break
			}
			bits--
		}
		p := netip.PrefixFrom(lo, bits)
		out = append(out, p)
		last := lastAddr(p)
		if last == r.hi {
			return out
		}
		lo = last.Next()
	}
}

// prefixSet is the shortest sorted list of non-overlapping prefixes that
// covers every address of include and none of exclude. Squid's dst ACL
// needs exactly that: it drops an entry that overlaps another one.
func prefixSet(include, exclude []netip.Prefix) []netip.Prefix {
	toRanges := func(ps []netip.Prefix) []addrRange {
		rs := make([]addrRange, 0, len(ps))
		for _, p := range ps {
			rs = append(rs, prefixRange(p))
		}
		return mergeRanges(rs)
	}
	var out []netip.Prefix
	for _, r := range subtractRanges(toRanges(include), toRanges(exclude)) {
		out = append(out, rangePrefixes(r)...)
	}
	return out
}
