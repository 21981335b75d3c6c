package orchestrate

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
)

// CreateNetworks creates the plan's networks, each on a free /28 of the
// plan's pool (see subnet.go); the plan records the subnets used, and each
// container's fixed address on the internal network (planAddresses).
func (s *Session) CreateNetworks(ctx context.Context) error {
	alloc, err := s.subnets(ctx)
	if err != nil {
		return err
	}
	// Created together (each its own round trip, and neither depends on
	// the other), recorded in the plan's order; one that failed is not
	// recorded, the other is, so teardown removes it. Their first subnets
	// are taken in the plan's order, so a run on a free pool gets the
	// same ones as one after the other.
	ids := make([]string, len(s.Plan.Networks))
	errs := make([]error, len(s.Plan.Networks))
	firsts := make([]netip.Prefix, len(s.Plan.Networks))
	for i := range firsts {
		if alloc != nil {
			if firsts[i], errs[i] = alloc.Next(); errs[i] != nil {
				errs[i] = fmt.Errorf("creating network %s: %w", s.Plan.Networks[i].Name, errs[i])
			}
		}
	}
	var wg sync.WaitGroup
	for i := range s.Plan.Networks {
		if errs[i] != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids[i], errs[i] = s.createNetwork(ctx, alloc, &s.Plan.Networks[i], firsts[i])
		}()
	}
	wg.Wait()
	for i, n := range s.Plan.Networks {
		if errs[i] == nil {
			s.Networks = append(s.Networks, CreatedNetwork{Name: n.Name, ID: ids[i], Internal: n.Internal, Subnet: n.Subnet})
		}
	}
	if err := firstError(errs); err != nil {
		return err
	}
	return s.planAddresses()
}

// firstError is the first error of errs that is not a cancellation
// caused by another, or else the first one.
func firstError(errs []error) error {
	var first error
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
		if first == nil {
			first = err
		}
	}
	return first
}

// planAddresses gives each container attached to the internal network a
// fixed address of its subnet, in the plan's order, after the one the
// engine reserves for the bridge. Every container's host entries are then
// known before any peer has started, so all can be created up front. A
// network without a subnet (the engine's pools) gets none: its
// containers are created one by one, each once its peers run.
func (s *Session) planAddresses() error {
	name := s.internalNetwork()
	var sub netip.Prefix
	var bridge netip.Addr
	for _, n := range s.Plan.Networks {
		if n.Name != name || n.Subnet == "" {
			continue
		}
		p, err := netip.ParsePrefix(n.Subnet)
		if err != nil || !p.Addr().Is4() {
			return fmt.Errorf("planning addresses: network %s: subnet %q is not an IPv4 range", n.Name, n.Subnet)
		}
		sub, bridge = p.Masked(), gatewayOf(p.Masked())
		if n.Gateway != "" {
			if bridge, err = netip.ParseAddr(n.Gateway); err != nil {
				return fmt.Errorf("planning addresses: network %s: gateway %q: %w", n.Name, n.Gateway, err)
			}
		}
	}
	if !sub.IsValid() {
		return nil
	}
	next := sub.Addr()
	for i := range s.Plan.Containers {
		nets := s.Plan.Containers[i].Spec.Networks
		for j := range nets {
			if nets[j].Network != name || nets[j].IPv4 != "" {
				continue
			}
			for next = next.Next(); next == bridge; next = next.Next() {
			}
			if !sub.Contains(next.Next()) { // the last address is the broadcast
				return fmt.Errorf("planning addresses: network %s (%s) has no address left for %s", name, sub, s.Plan.Containers[i].Role)
			}
			nets[j].IPv4 = next.String()
		}
	}
	return nil
}

// hostEntries are the step's peers as host:address entries, from the
// addresses planned for the peers on the internal network, or else the
// ones they got there.
func (s *Session) hostEntries(st Step) ([]string, error) {
	var out []string
	for _, h := range st.Hosts {
		ip := s.plannedAddress(h.Role)
		if peer := s.Find(h.Role); ip == "" && peer != nil {
			ip = peer.IPs[s.internalNetwork()]
		}
		if ip == "" {
			return nil, fmt.Errorf("creating %s: %s (%s) has no address on the internal network", st.Role, h.Name, h.Role)
		}
		out = append(out, h.Name+":"+ip)
	}
	return out, nil
}

// plannedAddress is role's fixed address on the internal network, or "".
func (s *Session) plannedAddress(role string) string {
	st, _ := s.Step(role)
	for _, a := range st.Spec.Networks {
		if a.Network == s.internalNetwork() {
			return a.IPv4
		}
	}
	return ""
}

func (s *Session) internalNetwork() string {
	for _, n := range s.Plan.Networks {
		if n.Internal {
			return n.Name
		}
	}
	return ""
}
